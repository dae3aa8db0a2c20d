package agent

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// TestResendOnSameStream: a sink that silently loses the first copy of
// every message, without breaking the stream, gets each one again from the
// resend timer, which the loop now drives only through the Sender's
// NextDeadline and Tick; the stream is never reset (the progress deadline
// is far off).
func TestResendOnSameStream(t *testing.T) {
	var mu sync.Mutex
	copies := map[uint64]int{}
	loseFirst := func(stream sluicev1.Sink_SendServer) error {
		if _, err := stream.Recv(); err != nil { // Hello
			return err
		}
		w := &sluicev1.Response{Body: &sluicev1.Response_Welcome{Welcome: &sluicev1.Welcome{
			ProtocolVersion: ProtocolVersion, Credits: &sluicev1.Credits{MessageLimit: 1 << 20, ByteLimit: 1 << 40}}}}
		if err := stream.Send(w); err != nil {
			return err
		}
		for {
			req, err := stream.Recv()
			if err != nil {
				return nil
			}
			id := req.GetMessageId()
			mu.Lock()
			copies[id]++
			n := copies[id]
			mu.Unlock()
			if n == 1 {
				continue // lost
			}
			ack := &sluicev1.Response{Body: &sluicev1.Response_Ack{Ack: &sluicev1.Ack{
				Ranges: []*sluicev1.IdRange{{First: id, Last: id}}}}}
			if err := stream.Send(ack); err != nil {
				return nil
			}
		}
	}
	fs := startFakeSink(t, loseFirst)
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
	waitAcked(t, a, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
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
