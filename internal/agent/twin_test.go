package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/metrictest"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestTwoAgentsOneID: a second agent given the id of one that has
// delivered (the same --agent-id on two agents, or on a spool recreated
// or restored) is refused by the sink: its spool never sent the ids the
// sink holds under that id (Hello.SentBelow), and its messages with those
// ids would be acknowledged as the first's duplicates and never stored
// (before: the first's 20 records stored, the second's 0 of 20, all
// acknowledged). Its messages wait in its spool; restarted with its own
// id (--change-agent-id) it delivers every one. The first agent is not
// disturbed. Two agents that both start before either sent anything are
// not told apart (docs/reliability.md).
func TestTwoAgentsOneID(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink"), Registry: reg}, "127.0.0.1:0")
	defer ts.Stop()
	cfg := func(c *Config) {
		c.SinkAddr, c.AgentID = ts.Addr, "twin"
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 200*time.Millisecond
	}
	ctx := context.Background()
	feed := func(a *Agent, name string, from int) map[string]bool {
		want := map[string]bool{}
		for i := from; i < from+20; i++ {
			r := fmt.Sprintf("%s record %d", name, i)
			want[r] = true
			if _, err := a.IngestFrom(ctx, name, uint64(i)+1, [][]byte{[]byte(r)}); err != nil {
				t.Fatal(err)
			}
		}
		return want
	}
	a := newTestAgent(t, filepath.Join(dir, "a"), cfg)
	defer a.Close()
	wantA := feed(a, "A", 0)
	waitAcked(t, a)
	bDir := filepath.Join(dir, "b")
	b := newTestAgent(t, bDir, cfg)
	wantB := feed(b, "B", 0)
	waitRefusedIDsTaken(t, b)
	// Its records wait in its spool. (Stats().Unacked lags the spool:
	// the driver learns of a spooled message after its ingest returns.)
	if st, waiting := b.Stats(), spooledRecords(t, b); st.AckedMessages != 0 || b.spool.AckedWatermark() != 0 || len(waiting) != 20 {
		t.Fatalf("the second agent: %d acknowledged (watermark %d), %d records in its spool; want 0, 0 and 20 (refused, kept in its spool)",
			st.AckedMessages, b.spool.AckedWatermark(), len(waiting))
	}
	// The first agent goes on delivering meanwhile.
	for r := range feed(a, "A", 20) {
		wantA[r] = true
	}
	waitAcked(t, a)
	b.Close()
	b = newTestAgent(t, bDir, func(c *Config) {
		cfg(c)
		c.AgentID, c.ChangeAgentID = "twin-b", true
	})
	defer b.Close()
	waitAcked(t, b)

	got := storedRecords(t, ts)
	for r, n := range got {
		if n != 1 {
			t.Errorf("record %q stored %d times", r, n)
		}
	}
	for _, want := range []map[string]bool{wantA, wantB} {
		for r := range want {
			if got[r] != 1 {
				t.Errorf("record %q stored %d times, want once", r, got[r])
			}
		}
	}
	if n := refusedIDsTaken(t, reg); n < 1 {
		t.Errorf("sluice_sink_refused_total{reason=\"ids_taken\"} = %v, want at least 1", n)
	}
}

// waitRefusedIDsTaken waits until a's sink refused it because its ids
// were taken by another spool.
func waitRefusedIDsTaken(t *testing.T, a *Agent) {
	t.Helper()
	if !testwait.Until(func() bool { return strings.Contains(a.Stats().LastError, "IDsTaken") }) {
		t.Fatalf("not refused as IDsTaken: %+v", a.Stats())
	}
}

// refusedIDsTaken is sluice_sink_refused_total{reason="ids_taken"} in reg.
func refusedIDsTaken(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return metrictest.Value(t, reg, "sluice_sink_refused_total{reason=ids_taken}")
}
