package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRRSmoke runs `bench rr` briefly: two protocols in all three
// modes, the servers split into their own processes, two reps. The table,
// the JSON rows and the SVG exist; numbers are not checked.
func TestBenchRRSmoke(t *testing.T) {
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "rr.json"), filepath.Join(dir, "rr.svg")
	out, err := exec.Command(sluiceBin, "bench", "rr", "--protocols", "tcp,rsocket", "--mode", "burst,open,closed",
		"--inflight", "1,8", "--rate", "200", "--duration", "200ms", "--burst-seconds", "1", "--reps", "2", "--split",
		"--json", js, "--svg", svg).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"| tcp | burst | 100 calls over 1 s |", "| rsocket | closed | 8 |", "| rsocket | open | 200/s |",
		"2 reps per configuration"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rep := readReport(t, js)
	if rep.Command != "bench rr" || len(rep.Rows) != 8 {
		t.Fatalf("report: command %q, %d rows, want 8", rep.Command, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if len(r.Reps) != 2 {
			t.Errorf("row %s: %d reps", r.Name, len(r.Reps))
		}
		for _, m := range []string{"rps", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "cpu_us_per_req", "server_cpu_us_per_req"} {
			if _, ok := r.Reps[0][m]; !ok {
				t.Errorf("row %s lacks %s", r.Name, m)
			}
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), "<polyline") {
		t.Errorf("svg: %v %.200s", err, b)
	}
}

// TestBenchRRBadFlags: bad input is a usage error, not a run.
func TestBenchRRBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--protocols", "carrier-pigeon"}, {"--mode", "steady"}, {"--inflight", "0"}, {"--rate", "-1"}} {
		cmd := exec.Command(sluiceBin, append([]string{"bench", "rr"}, args...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2\n%s", args, err, out)
		}
	}
}
