package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRSocketSmoke runs `bench rsocket` on tiny durations without the
// rsocket-go peer: every row is measured, gRPC gets its ratio, the JSON
// report has every row, and the peer is reported as skipped with how to
// build it.
func TestBenchRSocketSmoke(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(sluiceBin, "bench", "rsocket", "--duration", "200ms", "--inflight", "1,4",
		"--idle-conns", "3", "--conns", "2", "--json", js)
	cmd.Dir = t.TempDir() // no interop/rsocket-go/rsgo-bench to find
	cmd.Env = append(cmd.Environ(), "PATH=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"| sluice request-response, 4 in flight |", "| sluice (async API) request-response, 4 in flight |", "| gRPC bidi request-response, 4 in flight |",
		"| sluice request-stream |", "frame codec (64 B PAYLOAD", "idle connection:", "2 connections × 128 in flight",
		"rsocket-go: skipped: build it with"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rep := readReport(t, js)
	if rep.Command != "bench rsocket" || len(rep.Rows) != 11 { // 2 in-flight counts × (blocking, async, gRPC), stream, codec, idle, 2 × multi-connection
		t.Fatalf("report %s with %d rows, want 11", rep.Command, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if strings.Contains(r.Name, "request-response") && r.Summary["req_per_sec"].Median <= 0 {
			t.Errorf("row %s: %+v", r.Name, r.Summary)
		}
		if strings.HasPrefix(r.Name, "gRPC") && r.Summary["sluice_ratio"].N != 1 {
			t.Errorf("row %s has no ratio: %+v", r.Name, r.Summary)
		}
	}
}
