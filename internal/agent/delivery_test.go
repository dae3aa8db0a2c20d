package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// storedRecords reads every record in the sink's store back through a
// Read session (the protocol, not the sink's internals), keyed by
// content.
func storedRecords(t *testing.T, ts *sinktest.Sink) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range sinktest.StoredRecords(t, ts.Addr) {
		got[string(r)]++
	}
	return got
}

// waitAcked waits until a has delivered and the sink acknowledged
// everything it spooled.
func waitAcked(t testing.TB, a *Agent) {
	t.Helper()
	if !testwait.Until(func() bool {
		st := a.Stats()
		return st.Unacked == 0 && st.InFlightMsgs == 0 && a.spool.AckedWatermark() == a.spool.Log().NextOffset()
	}) {
		t.Fatalf("not everything acknowledged: %+v", a.Stats())
	}
}

// TestDeliveryAcrossRestarts: records ingested while the sink restarts and
// while the agent restarts all end up in the store exactly once.
func TestDeliveryAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	spool := filepath.Join(dir, "spool")
	cfg := func(c *Config) {
		c.SinkAddr, c.MaxMessageBytes, c.MinRTO = ts.Addr, 8<<10, 100*time.Millisecond
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	}
	a := newTestAgent(t, spool, cfg)
	ctx := context.Background()
	want := map[string]int{}
	seq := uint64(0)
	feed := func(a *Agent, n int) {
		for i := 0; i < n; i++ {
			var recs [][]byte
			for j := 0; j < 50; j++ {
				r := fmt.Sprintf("batch %d record %d of feed %d", seq, j, len(want))
				want[r]++
				recs = append(recs, []byte(r))
			}
			seq++
			if _, err := a.IngestFrom(ctx, "test-producer", seq, recs); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed(a, 100)
	ts.Stop() // the sink goes away mid-delivery; ingest keeps working
	feed(a, 100)
	ts.Restart()
	feed(a, 50)
	a.Close() // and the agent restarts with messages unacknowledged
	a = newTestAgent(t, spool, cfg)
	defer a.Close()
	feed(a, 100)
	waitAcked(t, a)
	ts.Stop()
	ts.Restart() // dedup state must also survive a sink restart
	defer ts.Stop()
	got := storedRecords(t, ts)
	if len(got) != len(want) {
		t.Fatalf("store holds %d distinct records, want %d", len(got), len(want))
	}
	for r, n := range got {
		if n != 1 || want[r] != 1 {
			t.Fatalf("record %q stored %d times (ingested %d)", r, n, want[r])
		}
	}
}

// TestFailoverToNextSink: with the first sink down, reconnections walk the
// list and deliver through the second.
func TestFailoverToNextSink(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	a := newTestAgent(t, filepath.Join(dir, "spool"), func(c *Config) {
		c.SinkAddr = "127.0.0.1:1," + ts.Addr // nothing listens on port 1
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
	})
	defer a.Close()
	if err := a.Ingest(context.Background(), [][]byte{[]byte("via the second sink")}); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, a)
	if got := storedRecords(t, ts); got["via the second sink"] != 1 {
		t.Fatalf("store: %v", got)
	}
}
