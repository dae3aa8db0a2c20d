package main

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/seglog"
)

// TestDeadLetterEndToEnd: real processes. The agent's spool starts with
// a message the sink refuses for good (a body that is no batch, as a
// damaged or foreign spool could hold), then `sluice produce` sends 6 MB
// through a 2 MiB spool (--spool-quota 2MiB, --compression plain) while
// the agent is SIGKILLed once mid-stream. The refused message is set
// aside in the dead-letter log, so the spool never stays full: produce
// finishes, `sluice consume` prints exactly the input, and `sluice
// dead-letter list` names the refused message once. Before, the parked
// message held the watermark and produce waited on 507 until its timeout.
func TestDeadLetterEndToEnd(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	sp, err := spool.Open(spoolDir, 0, "", nil, seglog.WithSegmentBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	bad := spool.Append(nil, spool.Record{Kind: codec.Plain, Records: 1, Body: []byte("no batch: refused for good")})
	if _, err := sp.Log().Append([][]byte{bad}); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}

	const n = 60_000 // ~100 B each, random hex: 6 MB, three quotas
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var want []string
	var buf bytes.Buffer
	for i := range n {
		line := fmt.Sprintf("rec-%06d %016x%016x%016x%016x%016x", i, rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64())
		want = append(want, line)
		buf.WriteString(line + "\n")
	}
	input := filepath.Join(dir, "input.txt")
	if err := os.WriteFile(input, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	sinkAddr, ingestAddr, agentMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"))
	ag := start(t, "agent", "agent", "--sink", sinkAddr, "--spool", spoolDir, "--ingest", ingestAddr,
		"--metrics", agentMetrics, "--spool-quota", "2MiB", "--compression", "plain", "--max-message", "64KiB")
	producer := startBG(t, nil, "produce", "--agent", ingestAddr, "--file", input, "--batch-bytes", "64KiB")
	testwait.For(t, "acks", func() bool { return metric(agentMetrics, "sluice_agent_acked_records_total") > 0 })
	ag.restart() // SIGKILL mid-stream
	// The wait bounds a broken run (the spool stuck full); it measures nothing.
	if err := producer.wait(t, 3*time.Minute); err != nil {
		t.Fatalf("produce: %v\n%s", err, producer.stderr)
	}

	wantStore(t, sinkAddr, want)
	out, err := exec.Command(sluiceBin, "dead-letter", "list", spoolDir).CombinedOutput()
	if err != nil {
		t.Fatalf("dead-letter list: %v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); len(lines) != 1 ||
		!strings.HasPrefix(lines[0], "message 0\t") || !strings.Contains(lines[0], "ERROR_CODE_BAD_PAYLOAD") {
		t.Errorf("dead-letter list:\n%s\nwant message 0, refused as ERROR_CODE_BAD_PAYLOAD, once", out)
	}
}
