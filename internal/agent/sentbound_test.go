package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestSentBoundSurvivesRestart: an agent restarted on its own spool is
// never refused for ids taken: every id it sent is below the bound its
// Hello carries (spool.ReserveSent persists the bound before the id goes
// out), so the sink holds no id of its at or above it. Each restart comes
// as after a crash before the acknowledged watermark was persisted (the
// delivery state put back to 0), so the sink holds ids the agent sends
// again and the watermark does not cover them. The mutant
// mutation_nosentbound persists a bound that does not cover the id sent:
// the restarted agent is refused (IDsTaken) and this test fails.
func TestSentBoundSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	cfg := func(c *Config) {
		c.SinkAddr, c.AgentID = ts.Addr, "restarts"
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	}
	spoolDir := filepath.Join(dir, "spool")
	for round := range 3 {
		a := newTestAgent(t, spoolDir, cfg)
		for i := range 5 {
			if err := a.Ingest(context.Background(), [][]byte{fmt.Appendf(nil, "round %d record %d", round, i)}); err != nil {
				t.Fatal(err)
			}
		}
		var refused string
		if !testwait.Until(func() bool {
			st := a.Stats()
			if strings.Contains(st.LastError, "IDsTaken") {
				refused = st.LastError
				return true
			}
			return st.Unacked == 0 && a.spool.AckedWatermark() == a.spool.Log().NextOffset()
		}) {
			t.Fatalf("round %d: not everything acknowledged: %+v", round, a.Stats())
		}
		a.Close()
		if refused != "" {
			t.Fatalf("INVARIANT refused: round %d: the agent restarted on its own spool was refused: %s", round, refused)
		}
		if err := spool.WriteState(spoolDir, 0); err != nil {
			t.Fatal(err)
		}
	}
	got := storedRecords(t, ts)
	if len(got) != 15 {
		t.Fatalf("%d records stored, want 15", len(got))
	}
	for r, n := range got {
		if n != 1 {
			t.Errorf("record %q stored %d times", r, n)
		}
	}
}
