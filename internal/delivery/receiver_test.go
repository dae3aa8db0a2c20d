package delivery

import (
	"errors"
	"reflect"
	"testing"
)

// The tests in this file follow docs/protocol.md, section "Receiver state
// table" (also in doc.go and TABLES.md): TestReceiverStateTable has at least
// one row per cell, state × event, named "State/Event ...".

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

// Setups, each with its actions drained.
func handshaking(t *testing.T) *Receiver { return newTestReceiver(t) }

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

// closedAfterHello: handshake done, 0 queued, then the stream closed.
func closedAfterHello(t *testing.T) *Receiver {
	r := receiving(t)
	rstep(t, r, Close())
	return r
}

func welcome(m, b uint64) ReceiverAction {
	return ReceiverAction{Kind: ActionWelcome, MsgLimit: m, ByteLimit: b, Version: ProtocolVersion}
}
func grant(m, b uint64) ReceiverAction {
	return ReceiverAction{Kind: ActionGrant, MsgLimit: m, ByteLimit: b}
}
func enqueue(id uint64, size int64) ReceiverAction {
	return ReceiverAction{Kind: ActionEnqueue, ID: id, Size: size}
}
func ackOf(rs ...Range) ReceiverAction { return ReceiverAction{Kind: ActionAck, Ranges: rs} }
func reject(id uint64, why Reason) ReceiverAction {
	return ReceiverAction{Kind: ActionReject, ID: id, Reason: why}
}
func fail(why Reason) ReceiverAction { return ReceiverAction{Kind: ActionFail, Reason: why} }

func TestReceiverStateTable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*testing.T) *Receiver
		ev    ReceiverEvent
		want  []ReceiverAction
		state ReceiverState
		err   bool
	}{
		// Handshaking.
		{"Handshaking/Hello grants the queue's capacity", handshaking,
			Hello(ProtocolVersion), []ReceiverAction{welcome(2, 100)}, ReceiverReceiving, false},
		{"Handshaking/Hello from a newer agent settles on our version", handshaking,
			Hello(ProtocolVersion + 1), []ReceiverAction{welcome(2, 100)}, ReceiverReceiving, false},
		{"Handshaking/Hello below the minimum version", handshaking,
			Hello(0), []ReceiverAction{fail(ReasonUnsupportedVersion)}, ReceiverClosed, false},
		{"Handshaking/Discarded before Hello", handshaking,
			Discarded(1, 10), []ReceiverAction{fail(ReasonNoHello)}, ReceiverClosed, false},
		{"Handshaking/Received before Hello", handshaking,
			Received(0, 10), []ReceiverAction{fail(ReasonNoHello)}, ReceiverClosed, false},
		{"Handshaking/Stored is an error (nothing enqueued)", handshaking,
			Stored([]uint64{0}), nil, ReceiverHandshaking, true},
		{"Handshaking/Close", handshaking,
			Close(), nil, ReceiverClosed, false},

		// Receiving. Limits below are received + free room.
		{"Receiving/Hello again", receiving,
			Hello(ProtocolVersion), []ReceiverAction{fail(ReasonDuplicateHello)}, ReceiverClosed, false},
		{"Receiving/Received enqueues", receivingEmpty,
			Received(5, 20), []ReceiverAction{enqueue(5, 20)}, ReceiverReceiving, false},
		{"Receiving/Received fills the queue", receiving,
			Received(1, 10), []ReceiverAction{enqueue(1, 10)}, ReceiverBlocked, false},
		{"Receiving/Received bigger than the queue into an empty queue", receivingEmpty,
			Received(0, 150), []ReceiverAction{enqueue(0, 150)}, ReceiverBlocked, false},
		{"Receiving/Received duplicate of a queued id hands back its credit", receiving,
			Received(0, 10), []ReceiverAction{grant(3, 110)}, ReceiverReceiving, false},
		{"Receiving/Received oversize", receiving,
			Received(1, 151), []ReceiverAction{reject(1, ReasonOversize), grant(3, 251)}, ReceiverReceiving, false},
		{"Receiving/Received over byte credit", receiving,
			Received(1, 95), []ReceiverAction{reject(1, ReasonOverCredit), grant(3, 195)}, ReceiverReceiving, false},
		{"Receiving/Discarded hands back its credit", receiving,
			Discarded(1, 30), []ReceiverAction{grant(3, 130)}, ReceiverReceiving, false},
		{"Receiving/Stored acks and grants", receiving,
			Stored([]uint64{0}), []ReceiverAction{ackOf(Range{0, 0}), grant(3, 110)}, ReceiverReceiving, false},
		{"Receiving/Stored of ids not queued acks only", receiving,
			Stored([]uint64{9, 7, 8, 7}), []ReceiverAction{ackOf(Range{7, 9})}, ReceiverReceiving, false},
		{"Receiving/Stored empty", receiving,
			Stored(nil), nil, ReceiverReceiving, false},
		{"Receiving/Close", receiving,
			Close(), nil, ReceiverClosed, false},

		// Blocked (full by count: 0 and 1 queued).
		{"Blocked/Hello again", blockedFull,
			Hello(ProtocolVersion), []ReceiverAction{fail(ReasonDuplicateHello)}, ReceiverClosed, false},
		{"Blocked/Received over message credit", blockedFull,
			Received(2, 10), []ReceiverAction{reject(2, ReasonOverCredit), grant(3, 110)}, ReceiverBlocked, false},
		{"Blocked/Received of 0 bytes into a queue full by bytes", func(t *testing.T) *Receiver {
			r := receivingEmpty(t)
			rstep(t, r, Received(0, 100))
			return r
		}, Received(1, 0), []ReceiverAction{enqueue(1, 0)}, ReceiverBlocked, false},
		{"Blocked/Received duplicate", blockedFull,
			Received(1, 10), []ReceiverAction{grant(3, 110)}, ReceiverBlocked, false},
		{"Blocked/Received oversize", blockedFull,
			Received(2, 200), []ReceiverAction{reject(2, ReasonOversize), grant(3, 300)}, ReceiverBlocked, false},
		{"Blocked/Discarded hands back its credit, still full", blockedFull,
			Discarded(2, 10), []ReceiverAction{grant(3, 110)}, ReceiverBlocked, false},
		{"Blocked/Stored one frees room", blockedFull,
			Stored([]uint64{1}), []ReceiverAction{ackOf(Range{1, 1}), grant(3, 110)}, ReceiverReceiving, false},
		{"Blocked/Stored all, one Ack with compressed ranges", blockedFull,
			Stored([]uint64{1, 0, 4}), []ReceiverAction{ackOf(Range{0, 1}, Range{4, 4}), grant(4, 120)}, ReceiverReceiving, false},
		{"Blocked/Stored of ids not queued stays blocked", blockedFull,
			Stored([]uint64{3}), []ReceiverAction{ackOf(Range{3, 3})}, ReceiverBlocked, false},
		{"Blocked/Close", blockedFull,
			Close(), nil, ReceiverClosed, false},

		// Closed: everything is ignored, including the storage writer's late
		// reports for the stream.
		{"Closed/Hello ignored", closedAfterHello,
			Hello(ProtocolVersion), nil, ReceiverClosed, false},
		{"Closed/Received ignored", closedAfterHello,
			Received(1, 10), nil, ReceiverClosed, false},
		{"Closed/Discarded ignored", closedAfterHello,
			Discarded(1, 10), nil, ReceiverClosed, false},
		{"Closed/Stored ignored", closedAfterHello,
			Stored([]uint64{0}), nil, ReceiverClosed, false},
		{"Closed/Stored ignored, even before any Hello", func(t *testing.T) *Receiver {
			r := newTestReceiver(t)
			rstep(t, r, Close())
			return r
		}, Stored([]uint64{0}), nil, ReceiverClosed, false},
		{"Closed/Close", closedAfterHello,
			Close(), nil, ReceiverClosed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.setup(t)
			err := r.Step(tt.ev)
			if (err != nil) != tt.err {
				t.Fatalf("Step(%v) error = %v, want error %t", tt.ev, err, tt.err)
			}
			if err != nil && !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("error %v does not wrap ErrInvalidEvent", err)
			}
			if ierr := r.checkInvariants(); ierr != nil {
				t.Fatal(ierr)
			}
			got := r.Ready()
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("actions\n got %v\nwant %v", got, tt.want)
				}
			}
			if s := r.State(); s != tt.state {
				t.Errorf("state %v, want %v", s, tt.state)
			}
		})
	}
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
