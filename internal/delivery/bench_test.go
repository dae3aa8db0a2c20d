package delivery

import (
	"testing"
	"time"
)

// Steady-state benchmarks: once the ring and the action buffers have grown
// to the working set, stepping must not allocate. TestSteadyStateAllocs
// enforces 0 allocs/op in every go test run.

// senderSteadyCycle returns one op of the Sender's steady state: a message
// is spooled and sent, and the one sent 64 messages earlier is acked.
func senderSteadyCycle(tb testing.TB, cfg SenderConfig) func() {
	s := newTestSender(tb, cfg)
	const depth = 64
	mustStep(tb, s, Connected(1<<62, 1<<62, 0))
	ranges := make([]Range, 1)
	id, now := uint64(0), int64(0)
	cycle := func() {
		now += int64(10 * time.Microsecond)
		mustStep(tb, s, Spooled(id, 512, now))
		if id >= depth {
			ranges[0] = Range{id - depth, id - depth}
			mustStep(tb, s, Acked(ranges, now))
		}
		id++
	}
	for range 4 * depth { // warm up: grow the ring and buffers
		cycle()
	}
	return cycle
}

// senderTimeoutCycle: a message is spooled and sent, times out, is resent
// and is acked. With tick, the timeout comes from Tick at the Sender's
// NextDeadline, as a driver with one timer sees it; otherwise from a
// Timeout event, as a driver keeping its own timers sees it.
func senderTimeoutCycle(tb testing.TB, tick bool) func() {
	rto := time.Millisecond
	s := newTestSender(tb, SenderConfig{MaxInFlightMsgs: 64, MinRTO: rto, InitialRTO: rto, MaxRTO: rto})
	mustStep(tb, s, Connected(1<<62, 1<<62, 0))
	ranges := make([]Range, 1)
	id, now := uint64(0), int64(0)
	cycle := func() {
		now += int64(rto)
		mustStep(tb, s, Spooled(id, 512, now))
		if tick {
			at, ok := s.NextDeadline()
			if !ok || at != now+int64(rto) {
				tb.Fatalf("NextDeadline() = %d, %t; want %d", at, ok, now+int64(rto))
			}
			mustStep(tb, s, Tick(at))
		} else {
			mustStep(tb, s, Timeout(id, 1, now+int64(rto)))
		}
		ranges[0] = Range{id, id}
		mustStep(tb, s, Acked(ranges, now+int64(rto)))
		id++
	}
	for range 256 {
		cycle()
	}
	return cycle
}

// receiverCycle: a message is received, and the one received 32 messages
// earlier is stored.
func receiverCycle(tb testing.TB) func() {
	r, err := NewReceiver(ReceiverConfig{QueueMsgs: 64, QueueBytes: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	mustRStep(tb, r, Hello(ProtocolVersion))
	ids := make([]uint64, 1)
	id := uint64(0)
	cycle := func() {
		mustRStep(tb, r, Received(id, 512))
		if id >= 32 {
			ids[0] = id - 32
			mustRStep(tb, r, Stored(ids))
		}
		id++
	}
	for range 4096 {
		cycle()
	}
	return cycle
}

func BenchmarkSenderSteadyState(b *testing.B) {
	b.Run("fixed", func(b *testing.B) { runCycle(b, senderSteadyCycle(b, SenderConfig{MaxInFlightMsgs: 64})) })
	b.Run("auto", func(b *testing.B) { runCycle(b, senderSteadyCycle(b, SenderConfig{})) })
}

func BenchmarkSenderTimeout(b *testing.B) { runCycle(b, senderTimeoutCycle(b, false)) }

func BenchmarkSenderTick(b *testing.B) { runCycle(b, senderTimeoutCycle(b, true)) }

func BenchmarkReceiverSteadyState(b *testing.B) { runCycle(b, receiverCycle(b)) }

func runCycle(b *testing.B, cycle func()) {
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		cycle()
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	for name, cycle := range map[string]func(){
		"SenderSteadyState/fixed": senderSteadyCycle(t, SenderConfig{MaxInFlightMsgs: 64}),
		"SenderSteadyState/auto":  senderSteadyCycle(t, SenderConfig{}),
		"SenderTimeout":           senderTimeoutCycle(t, false),
		"SenderTick":              senderTimeoutCycle(t, true),
		"ReceiverSteadyState":     receiverCycle(t),
	} {
		if a := testing.AllocsPerRun(10000, cycle); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
}

func mustStep(tb testing.TB, s *Sender, ev Event) {
	if err := s.Step(ev); err != nil {
		tb.Fatal(err)
	}
	s.Ready()
	s.Advance()
}

func mustRStep(tb testing.TB, r *Receiver, ev ReceiverEvent) {
	if err := r.Step(ev); err != nil {
		tb.Fatal(err)
	}
	r.Ready()
	r.Advance()
}

// BenchmarkSenderOneTimerDriver: the steady state as a driver sees it,
// NextDeadline read after every Step to keep its one timer. (The agent's
// loop used to keep a container/heap of every ArmTimer until it fired, one
// RTO later, plus a map of live timers: about 400 ns and one allocation
// per message on top of the Sender, measured when the timers moved here.)
func BenchmarkSenderOneTimerDriver(b *testing.B) {
	s := newTestSender(b, SenderConfig{MaxInFlightMsgs: 64})
	var clockAt int64
	st := func(ev Event) {
		mustStep(b, s, ev)
		if at, ok := s.NextDeadline(); ok && at != clockAt {
			clockAt = at // a real driver resets its timer here
		}
	}
	st(Connected(1<<62, 1<<62, 0))
	ranges := make([]Range, 1)
	id, now := uint64(0), int64(0)
	cycle := func() {
		now += int64(10 * time.Microsecond)
		st(Spooled(id, 512, now))
		if id >= 64 {
			ranges[0] = Range{id - 64, id - 64}
			st(Acked(ranges, now))
		}
		id++
	}
	for range 256 {
		cycle()
	}
	runCycle(b, cycle)
}
