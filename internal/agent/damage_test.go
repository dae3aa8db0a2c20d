package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"

	dto "github.com/prometheus/client_model/go"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/metrictest"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/seglog"
)

// TestDamagedSpoolRepairAndResume: a corrupt byte among acknowledged
// messages stops the agent with an error naming the segment and the exact
// repair command; after the repair the agent starts (the watermark beyond
// the repaired log's end is a warning, not fatal), never reuses an
// acknowledged id, and delivers every surviving unacknowledged message
// and new ones.
func TestDamagedSpoolRepairAndResume(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	a := newTestAgent(t, spoolDir, func(c *Config) { c.Compression = codec.Plain })
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		if err := a.IngestMessage(ctx, [][]byte{[]byte(fmt.Sprintf("old message %03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	// The sink acknowledged 0..40; the watermark is persisted as it would
	// be while the segment is still in use.
	if err := spool.WriteState(spoolDir, 41); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(spoolDir, "log")
	seg := filepath.Join(logDir, fmt.Sprintf("%020d.seg", 0))
	info, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	frame := info.Size() / 50 // equal messages, equal frames
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xFF}, 20*frame+frame/2) // inside message 20's body
	f.Close()

	_, err = New(Config{SinkAddr: "127.0.0.1:1", SpoolDir: spoolDir, Logger: quietLog})
	abs, _ := filepath.Abs(logDir)
	if err == nil || !strings.Contains(err.Error(), "sluice log check --repair "+abs+"\n") || !strings.Contains(err.Error(), seg) {
		t.Fatalf("start on a damaged spool: %v\nwant the segment %s and the command for %s", err, seg, abs)
	}
	if _, err := seglog.Repair(logDir); err != nil {
		t.Fatal(err)
	}
	// What survived the repair at or above the watermark must be delivered.
	survivors := map[string]bool{}
	l, err := seglog.Open(logDir)
	if err != nil {
		t.Fatal(err)
	}
	it := l.NewIterator(41, 1<<20)
	for it.Next() {
		m, _ := spool.Decode(it.Value())
		survivors[string(m.Body[len(m.Body)-len("old message 000"):])] = true
	}
	l.Close()

	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	a = newTestAgent(t, spoolDir, func(c *Config) {
		c.SinkAddr, c.ReconnectMin, c.ReconnectMax = ts.Addr, 10*time.Millisecond, 100*time.Millisecond
	})
	defer a.Close()
	if next := a.spool.Log().NextOffset(); next < 41 {
		t.Fatalf("new messages would reuse acknowledged ids from %d", next)
	}
	if err := a.Ingest(ctx, [][]byte{[]byte("new record")}); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, a)
	got := storedRecords(t, ts)
	if got["new record"] != 1 {
		t.Fatalf("new record not delivered: %v", got)
	}
	for r := range survivors {
		if got[r] != 1 {
			t.Fatalf("surviving unacknowledged %q not delivered once: %v", r, got)
		}
	}
	if len(got) != len(survivors)+1 {
		t.Fatalf("store holds %d records, want %d survivors and one new", len(got), len(survivors))
	}
}

// TestSkipLostHoles: holes in the backlog (ids a repair quarantined) are
// settled in the Sender so the ids around them are sent and the
// watermark can pass them.
func TestSkipLostHoles(t *testing.T) {
	s, err := delivery.NewSender(delivery.SenderConfig{Watermark: 5})
	if err != nil {
		t.Fatal(err)
	}
	backlog := []spool.Spooled{{ID: 5, Size: 10}, {ID: 6, Size: 10}, {ID: 8, Size: 10}, {ID: 9, Size: 10}, {ID: 12, Size: 10}}
	lost := []delivery.Range{{First: 7, Last: 7}, {First: 10, Last: 11}}
	rest, err := skipLost(s, func(uint64) error { return nil }, backlog, lost)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 1 || rest[0].ID != 12 {
		t.Fatalf("rest %+v, want id 12 only", rest)
	}
	if err := s.Step(delivery.Spooled(12, 10, 1)); err != nil {
		t.Fatalf("Spooled after the holes: %v", err)
	}
	s.Ready()
	s.Advance()
	if s.Watermark() != 5 {
		t.Fatalf("watermark %d before any ack, want 5", s.Watermark())
	}
	if err := s.Step(delivery.Acked([]delivery.Range{{First: 5, Last: 6}, {First: 8, Last: 9}, {First: 12, Last: 12}}, 2)); err != nil {
		t.Fatal(err)
	}
	if s.Watermark() != 13 {
		t.Fatalf("watermark %d after acking every surviving id, want 13", s.Watermark())
	}
}

// TestSpoolMissingHeadStarts: segments gone from the front of the log
// (deleted after their ack while the disk was too full to persist the
// watermark, or by hand) are a warning: the agent starts at the log's first
// message instead of refusing to start for good.
func TestSpoolMissingHeadStarts(t *testing.T) {
	dir := t.TempDir()
	small := func(c *Config) { c.segmentBytes = 4096; c.Compression = codec.Plain }
	a := newTestAgent(t, dir, small)
	for i := 0; i < 100; i++ {
		if err := a.IngestMessage(context.Background(), [][]byte{[]byte(fmt.Sprintf("message %03d %0100d", i, i))}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	if err := os.Remove(filepath.Join(dir, "log", fmt.Sprintf("%020d.seg", 0))); err != nil {
		t.Fatal(err)
	}
	a = newTestAgent(t, dir, small)
	defer a.Close()
	first := a.spool.Log().FirstOffset()
	if first == 0 || a.spool.AckedWatermark() != first {
		t.Fatalf("first %d, watermark %d", first, a.spool.AckedWatermark())
	}
	if got := spooledRecords(t, a); len(got) != 100-int(first) {
		t.Fatalf("backlog of %d records, want %d", len(got), 100-first)
	}
}

// TestDamagedFinalMessageKeepsItsID: the spool's final message, delivered
// and stored by the sink, is damaged on disk while the agent is stopped,
// and its acknowledgement was not yet persisted (the watermark is saved
// at a rate). At the next start the agent quarantines it and must not
// give its id to a new message: the sink holds that id and would drop
// the new message as a duplicate of the lost one, though the producer
// was told it was accepted. Before, it did (found by hand: "NEW-A"
// answered 200 and never stored).
func TestDamagedFinalMessageKeepsItsID(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	connect := func(c *Config) {
		c.Compression = codec.Plain
		c.SinkAddr, c.ReconnectMin, c.ReconnectMax = ts.Addr, 10*time.Millisecond, 100*time.Millisecond
	}
	a := newTestAgent(t, spoolDir, connect)
	ctx := context.Background()
	const n = 5
	deliverOld(t, a, n)
	a.Close()
	// The sink stored 0..4; the persisted watermark is behind, at 3.
	if err := spool.WriteState(spoolDir, 3); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(spoolDir, "log", fmt.Sprintf("%020d.seg", 0))
	info, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	frame := info.Size() / n // equal messages, equal frames
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, (n-1)*frame+frame/2)
	b[0] ^= 0x5A
	f.WriteAt(b, (n-1)*frame+frame/2) // inside the final message's body
	f.Close()

	a = newTestAgent(t, spoolDir, connect)
	defer a.Close()
	if next := a.spool.Log().NextOffset(); next != n {
		t.Fatalf("after the damaged final message %d the next id is %d, want %d: a new message would take an id the sink holds", n-1, next, n)
	}
	if err := a.Ingest(ctx, [][]byte{[]byte("new record")}); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, a)
	storedOnce(t, ts, n, "new record")
}

// TestPowerCutKeepsIDs: with --spool-sync none (or an interval) the agent
// sends messages before they are fsynced. A machine crash then loses the
// spool's unsynced tail although the sink stored those messages; the
// messages after the restart must not take their ids, or the sink drops
// them as duplicates although their producers had a 200. The crash is
// made by hand: the spool's reservation file as it was, its segment cut
// back to the first 2 of 5 messages, and the persisted watermark either
// ahead of the cut log (the sink's acks were persisted) or behind it.
func TestPowerCutKeepsIDs(t *testing.T) {
	for _, watermark := range []uint64{5, 1} {
		t.Run(fmt.Sprintf("watermark-%d", watermark), func(t *testing.T) {
			dir := t.TempDir()
			spoolDir := filepath.Join(dir, "spool")
			ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
			defer ts.Stop()
			connect := func(c *Config) {
				c.Compression, c.SpoolSync = codec.Plain, seglog.SyncNone()
				c.SinkAddr, c.ReconnectMin, c.ReconnectMax = ts.Addr, 10*time.Millisecond, 100*time.Millisecond
			}
			a := newTestAgent(t, spoolDir, connect)
			ctx := context.Background()
			const n = 5
			deliverOld(t, a, n)
			logDir := filepath.Join(spoolDir, "log")
			reservation, err := os.ReadFile(filepath.Join(logDir, seglog.ReservationFile))
			if err != nil {
				t.Fatal(err)
			}
			a.Close()
			if err := os.WriteFile(filepath.Join(logDir, seglog.ReservationFile), reservation, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := spool.WriteState(spoolDir, watermark); err != nil {
				t.Fatal(err)
			}
			seg := filepath.Join(logDir, fmt.Sprintf("%020d.seg", 0))
			info, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(seg, info.Size()/n*2); err != nil { // equal messages, equal frames
				t.Fatal(err)
			}

			a = newTestAgent(t, spoolDir, connect)
			defer a.Close()
			if next := a.spool.Log().NextOffset(); next < n {
				t.Fatalf("after the power cut the next id is %d: a new message would take an id the sink holds (%d..%d)", next, 2, n-1)
			}
			if err := a.Ingest(ctx, [][]byte{[]byte("new record")}); err != nil {
				t.Fatal(err)
			}
			waitAcked(t, a)
			storedOnce(t, ts, n, "new record")
			// The skipped ids are below the agent's watermark once the
			// message resent from behind them is acknowledged: its next
			// Hello settles them, and the sink's index keeps no gap.
			a.Close()
			a = newTestAgent(t, spoolDir, connect)
			defer a.Close()
			if !testwait.Until(func() bool { return sinkGauge(t, ts, "sluice_sink_dedup_gaps") == 0 }) {
				t.Fatalf("the sink's dedup index keeps %v gaps after the agent's Hello", sinkGauge(t, ts, "sluice_sink_dedup_gaps"))
			}
			var lost dto.Metric
			if err := a.spoolM.Lost.Write(&lost); err != nil || lost.GetCounter().GetValue() != 0 {
				t.Fatalf("the skipped ids were counted as %v lost messages (%v)", lost.GetCounter().GetValue(), err)
			}
		})
	}
}

// deliverOld ingests n one-record messages "old message NNN" and waits
// until the sink acknowledged them all.
func deliverOld(t *testing.T, a *Agent, n int) {
	t.Helper()
	for i := range n {
		if err := a.IngestMessage(context.Background(), [][]byte{[]byte(fmt.Sprintf("old message %03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, a)
}

// storedOnce checks that the sink holds each of deliverOld's n records
// and the record latest exactly once.
func storedOnce(t *testing.T, ts *sinktest.Sink, n int, latest string) {
	t.Helper()
	got := storedRecords(t, ts)
	if got[latest] != 1 {
		t.Fatalf("%q (after the damage or the cut) is stored %d times, want once: %v", latest, got[latest], got)
	}
	for i := range n {
		if r := fmt.Sprintf("old message %03d", i); got[r] != 1 {
			t.Fatalf("%q stored %d times, want once: %v", r, got[r], got)
		}
	}
}

// sinkGauge is the value of the sink's gauge name.
func sinkGauge(t *testing.T, ts *sinktest.Sink, name string) float64 {
	t.Helper()
	return metrictest.Value(t, ts.Registry(), name)
}
