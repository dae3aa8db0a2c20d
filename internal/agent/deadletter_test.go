package agent

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/seglog"
)

// TestRefusedMessageDoesNotFillTheSpool: a real sink refuses one message
// for good (a body that is no batch: spooled by an older or broken
// agent, or damaged before it was spooled), the rest it takes. Before,
// the refused message was parked and held the acknowledged watermark, so
// the spool (4 MiB quota) kept every segment after it, filled, and
// ingest answered 507 for good: the loop below never finished. Now the
// agent sets the message aside in the dead-letter log once the spool is
// half full, and 30 MiB of records go through the 4 MiB spool; every one
// of them is stored exactly once, and the refused record is in the
// dead-letter log, not in the store.
func TestRefusedMessageDoesNotFillTheSpool(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	const quota = 4 << 20
	spoolDir := filepath.Join(dir, "spool")
	bad := spool.Append(nil, spool.Record{Kind: codec.Plain, Records: 1, Body: []byte("no batch: the sink refuses it for good")})
	sp, err := spool.Open(spoolDir, 0, "", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Log().Append([][]byte{bad}); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	a := newTestAgent(t, spoolDir, func(c *Config) {
		c.SinkAddr, c.SpoolQuota, c.SpoolSync = ts.Addr, quota, seglog.SyncNone()
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	})
	defer a.Close()
	fulls := 0
	want := ingestThroughFullSpool(t, a, func() { fulls++ })
	t.Logf("%d refusals with 507 on the way", fulls)
	waitAcked(t, a)
	wantStoredOnce(t, ts, want)
	var letters []deadletter.Letter
	if err := deadletter.Read(filepath.Join(spoolDir, deadletter.Dir), func(l deadletter.Letter) error {
		letters = append(letters, l)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want 1", len(letters))
	}
	if l := letters[0]; l.ID != 0 || l.Code != "ERROR_CODE_BAD_PAYLOAD" || !bytes.Equal(l.Record, bad) {
		t.Errorf("dead letter: message %d, code %q, record %q; want message 0, ERROR_CODE_BAD_PAYLOAD, the record as spooled",
			l.ID, l.Code, l.Record)
	}
}

// TestDeadLettersCountedAtStart: an agent started on a spool whose
// dead-letter log holds messages from an earlier run says so (a warning
// naming the commands) and counts them in
// sluice_agent_dead_letter_messages, which, unlike dead_letters_total,
// survives restarts until `sluice dead-letter clear`.
func TestDeadLettersCountedAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	sp, err := spool.Open(dir, 0, "", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	rec := spool.Append(nil, spool.Record{Kind: codec.Plain, Records: 1, Body: []byte("refused")})
	if _, err := sp.Log().Append([][]byte{rec, rec}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{0, 1, 1} { // 1 twice: a crash before the watermark moved
		if _, err := sp.SetAside(id, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if n := sp.DeadLetters(); n != 2 {
		t.Errorf("DeadLetters() = %d after setting 2 messages aside", n)
	}
	sp.Close()
	sp, err = spool.Open(dir, 0, "", quietLog)
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, w := range sp.Warnings() {
		warned = warned || strings.Contains(w, "2 messages the sink refused for good") && strings.Contains(w, "sluice dead-letter list")
	}
	if !warned {
		t.Errorf("no start-up warning of the dead letters: %q", sp.Warnings())
	}
	sp.Close()
	reg := prometheus.NewRegistry()
	a := newTestAgent(t, dir, func(c *Config) { c.Registry = reg })
	defer a.Close()
	if v, ok := value(t, reg, "sluice_agent_dead_letter_messages", nil); !ok || v != 2 {
		t.Errorf("sluice_agent_dead_letter_messages = %v (%t), want 2", v, ok)
	}
}
