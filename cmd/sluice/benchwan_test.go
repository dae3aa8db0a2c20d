package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchWANSmoke runs `sluice bench wan` on a few megabytes to check the
// harness end to end (child sink and link processes, agents, tables, CSV,
// JSON, SVG); the numbers are not checked here, see docs/benchmarks.md.
func TestBenchWANSmoke(t *testing.T) {
	dir := t.TempDir()
	csv, js, svg := filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	out, err := exec.Command(sluiceBin, "bench", "wan", "--scenarios", "thin,lan", "--bytes", "2MB",
		"--modes", "sync,async,async+zstd+dict", "--connections", "4",
		"--csv", csv, "--json", js, "--svg", svg).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"### thin: 40Mbit/s, RTT 40ms", "### lan", "| sync | 4 | 1 |", "| async+zstd+dict | 1 | auto |"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{csv, js, svg} {
		if b, err := os.ReadFile(f); err != nil || len(b) < 100 {
			t.Errorf("%s: %d bytes, %v", f, len(b), err)
		}
	}
}

// TestBenchWANSweepSmoke checks the window sweep runs and prints its table.
func TestBenchWANSweepSmoke(t *testing.T) {
	out, err := exec.Command(sluiceBin, "bench", "wan", "--sweep", "--sweep-rtts", "10ms",
		"--sweep-windows", "auto,10", "--sweep-rate", "40Mbit", "--sweep-duration", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "| 10ms |") || !strings.Contains(string(out), "auto / best fixed") {
		t.Errorf("sweep table missing:\n%s", out)
	}
}
