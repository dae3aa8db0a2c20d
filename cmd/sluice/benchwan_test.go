package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/bench"
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

// A --duration run feeds at most --max-bytes: before the bound, feeders
// cycled the data until the 4 GiB spool quota was full, whatever the
// duration, and then logged one ERROR each.
func TestBenchWANDurationBounded(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	const limit = 4 << 20
	out, err := exec.Command(sluiceBin, "bench", "wan", "--scenarios", "lan", "--modes", "async",
		"--duration", "60s", "--max-bytes", "4MiB", "--json", js).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rs []struct {
		RawBytes int64 `json:"raw_bytes"`
	}
	if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 1 {
		t.Fatalf("results %s: %v", b, err)
	}
	// The run ends once what was fed is delivered, long before 60 s; the
	// bound is on bytes, so no clock is asserted on.
	if rs[0].RawBytes <= 0 || rs[0].RawBytes > limit {
		t.Errorf("delivered %d bytes, want some and at most --max-bytes %d\n%s", rs[0].RawBytes, limit, out)
	}
	if strings.Contains(string(out), "ERROR") {
		t.Errorf("errors logged:\n%s", out)
	}
	if q := bench.SpoolQuota(limit); q < limit || q > 2*limit+64<<20 {
		t.Errorf("SpoolQuota(%d) = %d, want sized to the bound", limit, q)
	}
}
