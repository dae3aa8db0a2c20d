package delivery

import (
	"errors"
	"reflect"
	"testing"
)

// The cells of the Receiver's state table are the transcripts in
// testdata/receiver (TestReceiverStateTable, transcript_test.go); the tests
// here cover what the cells rely on.

// tableReceiverConfig: room for 2 messages or 100 bytes; messages up to 150
// bytes (more than the queue: admitted only into an empty queue).
var tableReceiverConfig = ReceiverConfig{QueueMsgs: 2, QueueBytes: 100, MaxMessageBytes: 150}

func newTestReceiver(t *testing.T) *Receiver {
	t.Helper()
	r, err := NewReceiver(tableReceiverConfig)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// receivingEmpty: handshake done, queue empty; limits 2 msgs / 100 bytes.
func receivingEmpty(t *testing.T) *Receiver {
	r := newTestReceiver(t)
	rstep(t, r, Hello(ProtocolVersion))
	return r
}

// receiving: 0 (10 bytes) queued; limits 2 / 100.
func receiving(t *testing.T) *Receiver {
	r := receivingEmpty(t)
	rstep(t, r, Received(0, 10))
	return r
}

// blockedFull: 0 and 1 (10 bytes each) queued: full by count; limits 2 / 100.
func blockedFull(t *testing.T) *Receiver {
	r := receiving(t)
	rstep(t, r, Received(1, 10))
	return r
}

func TestReceiverInvalidEvents(t *testing.T) {
	for _, ev := range []ReceiverEvent{Received(1, -1), {Kind: 99}, {}} {
		r := receiving(t)
		if err := r.Step(ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("Step(%v) = %v, want ErrInvalidEvent", ev, err)
		}
		if r.HasReady() || r.State() != ReceiverReceiving {
			t.Errorf("failed Step(%v) changed the Receiver", ev)
		}
	}
	bad := []ReceiverConfig{{QueueMsgs: -1}, {QueueBytes: -1}, {MaxMessageBytes: -1}, {MinVersion: 3, MaxVersion: 2}}
	for _, cfg := range bad {
		if _, err := NewReceiver(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewReceiver(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// Ack ranges stay valid across Steps taken between Ready and Advance.
func TestReceiverAckRangesOwnership(t *testing.T) {
	r := blockedFull(t)
	r.Step(Stored([]uint64{0}))
	first := r.Ready()
	r.Step(Stored([]uint64{1}))
	r.Step(Received(5, 10))
	r.Step(Stored([]uint64{5}))
	if !reflect.DeepEqual(first[0].Ranges, []Range{{0, 0}}) {
		t.Fatalf("first ack ranges overwritten: %v", first[0].Ranges)
	}
	r.Advance()
	rest := r.Ready()
	if !reflect.DeepEqual(rest[0].Ranges, []Range{{1, 1}}) || !reflect.DeepEqual(rest[3].Ranges, []Range{{5, 5}}) {
		t.Fatalf("later actions: %v", rest)
	}
	r.Advance()
	if r.HasReady() || len(r.ranges) != 0 {
		t.Fatalf("not drained: %d actions, %d ranges", len(r.actions), len(r.ranges))
	}
}

// The credit invariant holds through a long random run, and a Sender that
// keeps to its credits is never rejected.
func TestReceiverCreditsMatchSender(t *testing.T) {
	r, err := NewReceiver(ReceiverConfig{QueueMsgs: 4, QueueBytes: 1000, MaxMessageBytes: 3000})
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSender(t, SenderConfig{MaxInFlightMsgs: 100})
	welcome := rstep(t, r, Hello(ProtocolVersion))
	step(t, s, Connected(welcome[0].MsgLimit, welcome[0].ByteLimit, 0))
	var queue []uint64 // in the storage writer
	next := uint64(0)
	for i := range 2000 {
		now := int64(i)
		var toSink []Action
		toSink = append(toSink, step(t, s, Spooled(next, int64(i*37%1200), now))...)
		next++
		var toAgent []ReceiverAction
		for _, a := range toSink {
			if a.Kind == ActionSend {
				toAgent = append(toAgent, rstep(t, r, Received(a.ID, a.Size))...)
			}
		}
		if i%3 == 0 && len(queue) > 0 {
			toAgent = append(toAgent, rstep(t, r, Stored(queue))...)
			queue = queue[:0]
		}
		for len(toAgent) > 0 {
			a := toAgent[0]
			toAgent = toAgent[1:]
			var out []Action
			switch a.Kind {
			case ActionEnqueue:
				queue = append(queue, a.ID)
			case ActionReject:
				t.Fatalf("well-behaved Sender rejected: %v", a)
			case ActionAck:
				out = step(t, s, Acked(a.Ranges, now))
			case ActionGrant:
				out = step(t, s, Credits(a.MsgLimit, a.ByteLimit, now))
			}
			for _, o := range out {
				if o.Kind == ActionSend {
					toAgent = append(toAgent, rstep(t, r, Received(o.ID, o.Size))...)
				}
			}
		}
	}
	if s.Stats().Sent < 800 { // the 1000-byte queue, stored every third step, allows ~1000
		t.Fatalf("only %d sent", s.Stats().Sent)
	}
}
