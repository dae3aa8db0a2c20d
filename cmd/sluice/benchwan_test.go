package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/lab/bench"
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

// TestBenchWANSinkCPUProfile: --sink-cpuprofile makes each run's sink, a
// child process that the bench's own --cpuprofile does not see, write a
// CPU profile of itself to PREFIX.SCENARIO.MODE.REP; the sweep, which
// does not take it, refuses it.
func TestBenchWANSinkCPUProfile(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "sink")
	out, err := exec.Command(sluiceBin, "bench", "wan", "--scenarios", "lan", "--bytes", "2MB",
		"--modes", "async+zstd", "--sink-cpuprofile", prefix).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, err := os.ReadFile(prefix + ".lan.async+zstd.1")
	// runtime/pprof writes a gzipped profile.proto.
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("sink profile: %d bytes, %v; want a gzipped pprof profile\n%s", len(b), err, out)
	}
	out, err = exec.Command(sluiceBin, "bench", "wan", "--sweep", "--sink-cpuprofile", prefix).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--sink-cpuprofile") {
		t.Errorf("--sweep with --sink-cpuprofile: %v, want exit status 2 naming the flag\n%s", err, out)
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
	rep := readJSON[struct {
		Rows []struct {
			Reps []struct {
				RawBytes int64 `json:"raw_bytes"`
			}
		}
	}](t, js)
	if len(rep.Rows) != 1 || len(rep.Rows[0].Reps) != 1 {
		t.Fatalf("results: %+v", rep)
	}
	// The run ends once what was fed is delivered, long before 60 s; the
	// bound is on bytes, so no clock is asserted on.
	if got := rep.Rows[0].Reps[0].RawBytes; got <= 0 || got > limit {
		t.Errorf("delivered %d bytes, want some and at most --max-bytes %d\n%s", got, limit, out)
	}
	if strings.Contains(string(out), "ERROR") {
		t.Errorf("errors logged:\n%s", out)
	}
	if q := bench.SpoolQuota(limit); q < limit || q > 2*limit+64<<20 {
		t.Errorf("SpoolQuota(%d) = %d, want sized to the bound", limit, q)
	}
}

// --reps runs every mode that many times: the table shows medians with
// their spread and the JSON holds each run, its summary and the machine.
func TestBenchWANReps(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	out, err := exec.Command(sluiceBin, "bench", "wan", "--scenarios", "lan", "--bytes", "1MB",
		"--modes", "sync,async", "--connections", "2", "--reps", "2", "--json", js).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"[rep 2/2] lan / sync", "| sync | 2 | 1 |", "2 reps per configuration", "GOMAXPROCS"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rep := readReport(t, js)
	if rep.Command != "bench wan" || rep.Reps != 2 || rep.Machine.GOMAXPROCS < 1 || rep.Machine.GoVersion == "" {
		t.Errorf("report header %+v", rep)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows, want 2 (sync, async)", len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if len(r.Reps) != 2 || r.Summary["goodput_mb_per_sec"].N != 2 || r.Params["scenario"] != "lan" {
			t.Errorf("row %s: %d reps, summary %+v, params %v", r.Name, len(r.Reps), r.Summary["goodput_mb_per_sec"], r.Params)
		}
	}
}

func TestBenchRepsFlagChecked(t *testing.T) {
	for _, args := range [][]string{{"bench", "wan", "--reps", "0"}, {"bench", "delivery", "--reps", "-1"},
		{"bench", "ingest", "--reps", "0"}, {"bench", "wan", "--sweep", "--reps", "2"}, {"log", "bench", "--reps", "0"}} {
		out, err := exec.Command(sluiceBin, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--reps") {
			t.Errorf("%q: %v, want exit 2 naming --reps:\n%s", args, err, out)
		}
	}
}

func readReport(t *testing.T, path string) bench.Report { return readJSON[bench.Report](t, path) }

// readJSON reads the JSON file at path (a --json report) into a T.
func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return v
}

// --compression-level sets the agents' zstd effort (the WAN figures at
// the fastest level in docs/benchmarks.md come from it); an unknown level
// is a usage error naming the flag.
func TestBenchWANCompressionLevel(t *testing.T) {
	out, err := exec.Command(sluiceBin, "bench", "wan", "--scenarios", "lan", "--bytes", "2MB",
		"--modes", "async+zstd", "--compression-level", "fastest").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "| async+zstd |") {
		t.Fatalf("--compression-level fastest: %v\n%s", err, out)
	}
	out, err = exec.Command(sluiceBin, "bench", "wan", "--compression-level", "max").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--compression-level") {
		t.Errorf("--compression-level max: %v, want exit status 2 naming the flag\n%s", err, out)
	}
}
