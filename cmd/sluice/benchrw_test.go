package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestBenchRemoteWriteSmoke runs `sluice bench remote-write` briefly on
// loopback (the link proxy without limits) to check the harness end to
// end: both Prometheus, the agent and sink, the dictionary trained from
// the sink's records, the outage, the table and the JSON. The numbers are
// not checked here, see docs/benchmarks.md.
func TestBenchRemoteWriteSmoke(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		testskip.Missing(t, "SLUICE_PROMETHEUS", "prometheus", "prometheus is not installed (bash scripts/install-prometheus.sh)")
	}
	js := filepath.Join(t.TempDir(), "r.json")
	out, err := exec.Command(sluiceBin, "bench", "remote-write", "--scenarios", "lan", "--paths", "direct,sluice+dict",
		"--hosts", "3", "--duration", "2s", "--outage", "2s", "--train", "6s", "--json", js).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"### lan", "| direct |", "| sluice+dict |", "dictionary "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("%d rows in the JSON, want 2:\n%s", len(rep.Rows), b)
	}
	for _, row := range rep.Rows {
		for _, m := range []string{"link_bytes_per_sample", "samples_per_sec", "outage_samples", "outage_lost"} {
			if _, ok := row.Summary[m]; !ok {
				t.Errorf("row %s has no %s", row.Name, m)
			}
		}
	}
}

// `sluice dict train --records-from SINK` trains on the binary records a
// sink stored (remote-write requests: protobuf, newlines and all), which
// the line-reading INPUT cannot hold.
func TestDictTrainRecordsFrom(t *testing.T) {
	dir := t.TempDir()
	sinkAddr := freeAddr(t)
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--metrics", freeAddr(t))
	p := newProducer(t, sinkAddr)
	var recs [][]byte
	for i := range 400 {
		req := remoteWriteRequest("node_cpu_seconds_total", []string{"cpu", strconv.Itoa(i % 16), "instance", "10.0.0." + strconv.Itoa(i%7) + ":9100",
			"job", "node", "mode", []string{"user", "system", "idle", "iowait"}[i%4]}, float64(i)*1.25, 1700000000000+int64(i)*1000)
		recs = append(recs, telemetry.Append(nil, telemetry.RemoteWrite, req))
	}
	if err := p.Produce(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the records stored", func() bool {
		out, err := exec.Command(sluiceBin, "consume", "--sink", sinkAddr).Output()
		return err == nil && strings.Count(string(out), "\n") == len(recs)
	})
	dictPath := filepath.Join(dir, "rw.dict")
	out, err := exec.Command(sluiceBin, "dict", "train", "--records-from", sinkAddr, "--message", "1KiB", "--size", "4KiB", "--out", dictPath).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "trained on") || !strings.Contains(string(out), "held-out messages") {
		t.Errorf("dict train said:\n%s", out)
	}
	data, err := os.ReadFile(dictPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codec.ParseDictionary(data); err != nil {
		t.Errorf("the dictionary does not parse: %v", err)
	}
}

// INPUT files and --records-from are two sources of samples; both at once
// is a usage error, not one of them silently ignored.
func TestDictTrainRecordsFromRefusesInput(t *testing.T) {
	cmd := exec.Command(sluiceBin, "dict", "train", "--records-from", "127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "d"), "lines.txt")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 {
		t.Errorf("exit %d, want 2 (usage):\n%s", code, out)
	}
}
