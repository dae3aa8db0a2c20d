package driver

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// TestOlderSinkGetsHelloWithoutBound: an RSocket sink from before
// Hello.SentBelow refuses a Hello carrying it as malformed (its decoder
// ends the Hello at the watermark). The agent then leaves the field out
// for that sink and delivers: an upgraded agent keeps working with an
// older sink, which simply cannot check for another spool's ids.
func TestOlderSinkGetsHelloWithoutBound(t *testing.T) {
	// What an older sink answers: its decoder meets bytes after the
	// watermark, as today's decoder meets a byte after the bound.
	h, _, err := rsockettransport.Encode(nil, &protocol.Hello{AgentID: "a", Version: protocol.Version, HasSentBelow: true})
	if err != nil {
		t.Fatal(err)
	}
	_, derr := rsockettransport.Decode(append(h, 0), nil)
	if derr == nil {
		t.Fatal("a Hello with a byte after its last field decoded")
	}
	svc := newSink()
	svc.olderHello = &protocol.SessionError{Status: protocol.StatusInvalid, Msg: "from the agent: " + derr.Error()}
	r := newRig(t, svc, delivery.SenderConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	r.spool(t, "x")
	r.spool(t, "y")
	r.waitWatermark(t, 2)
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.hellos) < 2 || !svc.hellos[0].HasSentBelow {
		t.Fatalf("hellos %+v: want the first with the bound, refused", svc.hellos)
	}
	for _, h := range svc.hellos[1:] {
		if h.HasSentBelow {
			t.Errorf("a Hello after the refusal carries the bound: %+v", h)
		}
	}
}
