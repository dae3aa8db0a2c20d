package driver

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
	"github.com/sluicehq/sluice/seglog"
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

// TestHelloBoundCoversWatermark: the Hello's bound on sent ids is never
// below its watermark. The sink counts every id below the watermark as
// held (store.Dedup.Settle), and a spool's watermark can pass ids it
// never sent: those it skipped after power cuts (seglog's reservation).
// A bound below it would have the sink refuse the agent's own next
// session as another spool's (found by the simulation: seeds with three
// power cuts and no send between two of them stayed Disconnected).
func TestHelloBoundCoversWatermark(t *testing.T) {
	dir := t.TempDir()
	sp, err := spool.Open(dir, 0, "", quiet, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.ReserveSent(0); err != nil { // the bound: 1 + a step
		t.Fatal(err)
	}
	sp.Close()
	const watermark = 3 * defaults.SpoolIDReservation // ids skipped past the bound
	if err := spool.WriteState(dir, watermark); err != nil {
		t.Fatal(err)
	}
	if sp, err = spool.Open(dir, 0, "", quiet, seglog.WithSync(seglog.SyncNone())); err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if below, known := sp.SentBelow(); !known || below >= watermark {
		t.Fatalf("the spool's bound %d (known %v): the test wants one below the watermark %d", below, known, watermark)
	}
	s, err := delivery.NewSender(delivery.SenderConfig{Watermark: watermark})
	if err != nil {
		t.Fatal(err)
	}
	svc := newSink()
	ctx, cancel := context.WithCancel(context.Background())
	d := Start(ctx, memConfig(svc, sinceStart()), s, sp, metrics.New(nil), nil)
	defer func() { cancel(); <-d.Done() }()
	testwait.For(t, "a Hello", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return len(svc.hellos) > 0
	})
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if h := svc.hellos[0]; !h.HasSentBelow || h.SentBelow < watermark || h.Watermark != watermark {
		t.Fatalf("Hello: watermark %d, bound %d (sent %v); want the bound at least the watermark %d", h.Watermark, h.SentBelow, h.HasSentBelow, watermark)
	}
}
