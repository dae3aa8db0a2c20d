package delivery

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// tableSenderConfig is the Sender configuration of the state tables: a
// window of two messages, no byte window, RTO starting at 1s.
var tableSenderConfig = SenderConfig{
	MaxInFlightMsgs: 2,
	InitialRTO:      time.Second,
	MinRTO:          100 * time.Millisecond,
	MaxRTO:          8 * time.Second,
	ReconnectMin:    time.Second,
	ReconnectMax:    8 * time.Second,
}

func newTestSender(t testing.TB, cfg SenderConfig) *Sender {
	t.Helper()
	s, err := NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// step applies events, failing on any error, and returns the actions they
// produced, advanced.
func step(t testing.TB, s *Sender, evs ...Event) []Action {
	t.Helper()
	for _, ev := range evs {
		if err := s.Step(ev); err != nil {
			t.Fatalf("Step(%v): %v", ev, err)
		}
		if err := s.checkInvariants(); err != nil {
			t.Fatalf("after Step(%v): %v", ev, err)
		}
	}
	acts := slices.Clone(s.Ready())
	s.Advance()
	return acts
}

func rstep(t testing.TB, r *Receiver, evs ...ReceiverEvent) []ReceiverAction {
	t.Helper()
	for _, ev := range evs {
		if err := r.Step(ev); err != nil {
			t.Fatalf("Step(%v): %v", ev, err)
		}
		if err := r.checkInvariants(); err != nil {
			t.Fatalf("after Step(%v): %v", ev, err)
		}
	}
	acts := slices.Clone(r.Ready())
	for i := range acts {
		acts[i].Ranges = slices.Clone(acts[i].Ranges)
	}
	r.Advance()
	return acts
}

// Action shorthands for the tables.
func send(id uint64, size int64) Action { return Action{Kind: ActionSend, ID: id, Size: size} }
func arm(id uint64, attempt uint32, at int64) Action {
	return Action{Kind: ActionArmTimer, ID: id, Attempt: attempt, At: at}
}
func markAcked(w uint64) Action        { return Action{Kind: ActionMarkAcked, Watermark: w} }
func reconnect(d time.Duration) Action { return Action{Kind: ActionReconnect, After: d} }

var (
	dial    = Action{Kind: ActionDial}
	stalled = Action{Kind: ActionStalled}
)

// checkInvariants verifies the Sender's field invariants by walking the
// ring. Tests and the simulation call it after every Step.
func (s *Sender) checkInvariants() error {
	if !(s.base <= s.scan && s.scan <= s.fresh && s.fresh <= s.next) {
		return fmt.Errorf("cursors: base %d scan %d fresh %d next %d", s.base, s.scan, s.fresh, s.next)
	}
	if uint64(s.ring.n) != s.next-s.base {
		return fmt.Errorf("ring holds %d slots for [%d, %d)", s.ring.n, s.base, s.next)
	}
	var inMsgs, resend, parked int
	var inBytes int64
	for id := s.base; id < s.next; id++ {
		sl := s.slot(id)
		if id == s.base && sl.state == slotAcked {
			return fmt.Errorf("watermark %d is acked", id)
		}
		if id >= s.fresh && sl.attempt != 0 {
			return fmt.Errorf("id %d >= fresh %d was sent", id, s.fresh)
		}
		switch sl.state {
		case slotInFlight:
			inMsgs++
			inBytes += sl.size
			if !s.connected {
				return fmt.Errorf("id %d in flight while disconnected", id)
			}
		case slotQueued:
			if id < s.fresh {
				resend++
				if id < s.scan && s.resend > 0 {
					return fmt.Errorf("queued id %d below scan %d", id, s.scan)
				}
			}
		case slotParked:
			parked++
		}
	}
	if inMsgs != s.inflightMsgs || inBytes != s.inflightBytes || resend != s.resend || parked != s.parked {
		return fmt.Errorf("counters: inflight %d/%d want %d/%d, resend %d want %d, parked %d want %d",
			s.inflightMsgs, s.inflightBytes, inMsgs, inBytes, s.resend, resend, s.parked, parked)
	}
	if s.connected && s.sentMsgs > s.creditMsgs {
		return fmt.Errorf("sent %d messages over credit %d", s.sentMsgs, s.creditMsgs)
	}
	if s.rtt.rto < s.rtt.minRTO || s.rtt.rto > s.rtt.maxRTO {
		return fmt.Errorf("rto %v outside [%v, %v]", s.rtt.rto, s.rtt.minRTO, s.rtt.maxRTO)
	}
	return nil
}

// checkInvariants verifies the Receiver's queue bounds and credit invariant.
func (r *Receiver) checkInvariants() error {
	var bytes int64
	for _, size := range r.queue {
		bytes += size
	}
	n := len(r.queue)
	switch {
	case bytes != r.queuedBytes:
		return fmt.Errorf("queuedBytes %d, queue sums to %d", r.queuedBytes, bytes)
	case n > r.cfg.QueueMsgs:
		return fmt.Errorf("queue holds %d messages, capacity %d", n, r.cfg.QueueMsgs)
	case bytes > r.cfg.QueueBytes && n > 1:
		return fmt.Errorf("queue holds %d bytes in %d messages, capacity %d", bytes, n, r.cfg.QueueBytes)
	}
	if r.helloDone && !r.closed {
		m, b := r.limits()
		if m != r.msgLimit || b != r.byteLimit {
			return fmt.Errorf("advertised %d/%d, credit invariant gives %d/%d", r.msgLimit, r.byteLimit, m, b)
		}
	}
	return nil
}
