package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/protocol"
)

// TestResendOnSameStream: a sink that silently loses the first copy of
// every message, without breaking the stream, gets each one again from the
// resend timer, which the loop now drives only through the Sender's
// NextDeadline and Tick; the stream is never reset (the progress deadline
// is far off).
func TestResendOnSameStream(t *testing.T) {
	svc := newFakeService()
	svc.message = func(_ int, _ *protocol.Message, copies int) (protocol.Frame, error) {
		if copies == 1 {
			return skipReply, nil // lost
		}
		return nil, nil
	}
	fs := startFakeSink(t, svc)
	reg := prometheus.NewRegistry()
	a := newTestAgent(t, filepath.Join(t.TempDir(), "spool"), func(c *Config) {
		c.SinkAddr, c.Registry = fs.addr, reg
		c.MinRTO, c.ProgressTimeout = 50*time.Millisecond, time.Hour
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
	})
	defer a.Close()
	for i := range 3 {
		if err := a.Ingest(context.Background(), [][]byte{[]byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	waitAcked(t, a)
	_, _, copies := svc.snapshot()
	for id, n := range copies {
		if n != 2 {
			t.Errorf("message %d sent %d times, want 2 (lost, then resent once)", id, n)
		}
	}
	if len(copies) == 0 {
		t.Fatal("the sink saw no message")
	}
	if v, ok := value(t, reg, "sluice_agent_reconnects_total", nil); !ok || v != 0 {
		t.Errorf("reconnects_total = %v: the resend must come from the timer, not a new stream", v)
	}
	if v, _ := value(t, reg, "sluice_agent_resend_timeouts_total", nil); v < 1 {
		t.Errorf("resend_timeouts_total = %v, want >= 1", v)
	}
}
