package delivery

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// The cells of the Sender's state table are the transcripts in
// testdata/sender (TestSenderStateTable, transcript_test.go). The tests in
// this file pin down the rules the cells rely on (watermark, Karn,
// back-off, waiver, parking).

// Setups. Each returns a Sender in a known state with its actions drained;
// setups act at Now <= 1s and tests at T = 2s.
const T = 2000 * ms

// canSend: 0 in flight (attempt 1, sent at 0), window of 2.
func canSend(t *testing.T) *Sender {
	s := newTestSender(t, tableSenderConfig)
	step(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0))
	return s
}

// canSendFull: 0 and 1 in flight, the window is full but nothing waits.
func canSendFull(t *testing.T) *Sender {
	s := canSend(t)
	step(t, s, Spooled(1, 10, 0))
	return s
}

// blocked: 0 and 1 in flight, 2 waits for the window.
func blocked(t *testing.T) *Sender {
	s := canSendFull(t)
	step(t, s, Spooled(2, 10, 0))
	return s
}

func TestSenderInvalidEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
	}{
		{"Spooled gap", Spooled(5, 10, T)},
		{"Spooled repeat", Spooled(2, 10, T)},
		{"Spooled negative size", Spooled(3, -1, T)},
		{"Acked First > Last", Acked([]Range{{0, 0}, {4, 3}}, T)},
		{"Timeout never spooled", Timeout(3, 1, T)},
		{"Timeout attempt 0", Timeout(0, 0, T)},
		{"Timeout attempt never armed", Timeout(0, 2, T)},
		{"Connected twice", Connected(1, 1, T)},
		{"Disconnected jitter 1", Disconnected(1, T)},
		{"Disconnected jitter < 0", Disconnected(-0.1, T)},
		{"Disconnected jitter NaN", Disconnected(math.NaN(), T)},
		{"Rejected never spooled", Rejected(3, true, T)},
		{"unknown kind", Event{Kind: 99, Now: T}},
		{"zero event", Event{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := blocked(t) // 0, 1 in flight, 2 queued
			before := *s
			err := s.Step(tt.ev)
			if !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("Step(%v) = %v, want ErrInvalidEvent", tt.ev, err)
			}
			if s.HasReady() || s.now != before.now || s.next != before.next || s.stats != before.stats ||
				s.connected != before.connected || s.inflightMsgs != before.inflightMsgs {
				t.Fatalf("failed Step changed the Sender")
			}
		})
	}
	// Spooled of the id space's last id, and a restarted Sender that is fed
	// ids below its watermark.
	s := newTestSender(t, SenderConfig{Watermark: math.MaxUint64})
	if err := s.Step(Spooled(math.MaxUint64, 1, 0)); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("Spooled(MaxUint64) = %v", err)
	}
	s = newTestSender(t, SenderConfig{Watermark: 7})
	if err := s.Step(Spooled(6, 1, 0)); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("Spooled below the watermark = %v", err)
	}
	step(t, s, Spooled(7, 1, 0))
}

func TestSenderConfig(t *testing.T) {
	s := newTestSender(t, SenderConfig{})
	if s.RTO() != DefaultInitialRTO || !s.win.auto {
		t.Fatalf("zero config: RTO %v auto %t", s.RTO(), s.win.auto)
	}
	if m, b := s.Window(); m != autoInitMsgs || b != autoInitBytes {
		t.Fatalf("auto window starts at %d/%d", m, b)
	}
	bad := []SenderConfig{
		{MaxInFlightMsgs: -1},
		{MaxInFlightBytes: -1},
		{MinRTO: 2 * time.Second, MaxRTO: time.Second},
		{InitialRTO: time.Hour},
		{InitialRTO: time.Millisecond, MinRTO: time.Second},
		{MinRTO: -1},
		{ReconnectMin: -1},
		{ProgressTimeout: -1},
		{ReconnectMin: time.Hour, ReconnectMax: time.Second},
	}
	for _, cfg := range bad {
		if _, err := NewSender(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewSender(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// The watermark is the lowest unacked id: acks above a hole never move it,
// and filling the hole moves it past everything acked above.
func TestSenderWatermarkOutOfOrder(t *testing.T) {
	s := newTestSender(t, SenderConfig{MaxInFlightMsgs: 10, Watermark: 3})
	for id := uint64(3); id < 9; id++ {
		step(t, s, Spooled(id, 1, 0))
	}
	step(t, s, Connected(100, 1<<20, 0))
	if got := step(t, s, Acked([]Range{{5, 5}, {7, 8}}, ms)); slices.Contains(got, markAcked(4)) || s.Watermark() != 3 {
		t.Fatalf("acks above the watermark moved it: %v, watermark %d", got, s.Watermark())
	}
	got := step(t, s, Acked([]Range{{3, 3}}, ms))
	if s.Watermark() != 4 || !slices.Contains(got, markAcked(4)) {
		t.Fatalf("ack of 3: watermark %d, actions %v", s.Watermark(), got)
	}
	got = step(t, s, Acked([]Range{{0, 4}, {6, 6}}, ms)) // 0-2 are below the watermark: ignored
	if s.Watermark() != 9 || !slices.Equal(got[len(got)-1:], []Action{markAcked(9)}) {
		t.Fatalf("filling the holes: watermark %d, actions %v", s.Watermark(), got)
	}
	if st := s.Stats(); st.Acked != 6 {
		t.Fatalf("Acked = %d, want 6", st.Acked)
	}
}

// Acks settle an id in any state, e.g. one requeued by a broken stream:
// it is not resent on the next.
func TestSenderAckOfRequeued(t *testing.T) {
	s := newTestSender(t, tableSenderConfig)
	step(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0), Spooled(1, 10, 0), Disconnected(0, 0))
	step(t, s, Acked([]Range{{1, 1}}, ms)) // RTT 1ms: RTO drops to MinRTO
	got := step(t, s, Connected(100, 1<<20, 2*ms))
	want := []Action{send(0, 10), arm(0, 2, 2*ms+100*ms)}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Karn's algorithm: the RTT of a resent message is never sampled, and the
// sample of a batch ack is the newest message sent once.
func TestSenderKarn(t *testing.T) {
	s := newTestSender(t, SenderConfig{MaxInFlightMsgs: 10, InitialRTO: time.Second, MinRTO: time.Millisecond})
	step(t, s, Connected(100, 1<<20, 0), Spooled(0, 1, 0))
	step(t, s, Timeout(0, 1, 1000*ms)) // 0 resent at 1s
	step(t, s, Acked([]Range{{0, 0}}, 1001*ms))
	if s.SRTT() != 0 || s.RTO() != 2*time.Second {
		t.Fatalf("resent message sampled: SRTT %v RTO %v", s.SRTT(), s.RTO())
	}
	step(t, s, Spooled(1, 1, 1100*ms), Spooled(2, 1, 1120*ms))
	step(t, s, Acked([]Range{{1, 2}}, 1150*ms)) // newest sent once: 2, RTT 30ms
	if s.SRTT() != 30*time.Millisecond {
		t.Fatalf("SRTT %v, want 30ms from the newest id", s.SRTT())
	}
	if s.RTO() != 90*time.Millisecond { // 30 + 4 × 15
		t.Fatalf("RTO %v, want 90ms", s.RTO())
	}
}

// A stall fires every timer of a window; the RTO doubles once per round, not
// once per timer, and is capped.
func TestSenderBackoffOncePerRound(t *testing.T) {
	s := newTestSender(t, SenderConfig{MaxInFlightMsgs: 10, InitialRTO: time.Second, MinRTO: time.Second, MaxRTO: 5 * time.Second})
	step(t, s, Connected(100, 1<<20, 0))
	for id := range uint64(5) {
		step(t, s, Spooled(id, 1, 0))
	}
	for id := range uint64(5) {
		step(t, s, Timeout(id, 1, 1000*ms))
	}
	if s.RTO() != 2*time.Second {
		t.Fatalf("after one round of timeouts RTO = %v, want 2s", s.RTO())
	}
	step(t, s, Timeout(0, 2, 3000*ms))
	step(t, s, Timeout(1, 2, 3000*ms))
	if s.RTO() != 4*time.Second {
		t.Fatalf("after two rounds RTO = %v, want 4s", s.RTO())
	}
	step(t, s, Timeout(0, 3, 7000*ms))
	if s.RTO() != 5*time.Second {
		t.Fatalf("RTO = %v, want MaxRTO", s.RTO())
	}
	if st := s.Stats(); st.Timeouts != 8 || st.Resent != 8 || st.Sent != 13 {
		t.Fatalf("stats %+v", st)
	}
}

// A message bigger than the remaining byte credit, or than the window, goes
// alone when nothing is in flight; message credit is never waived.
func TestSenderBigMessageWaiver(t *testing.T) {
	s := newTestSender(t, SenderConfig{MaxInFlightMsgs: 10, MaxInFlightBytes: 100})
	got := step(t, s, Connected(3, 50, 0), Spooled(0, 10, 0), Spooled(1, 500, 0), Spooled(2, 10, 0))
	if len(got) != 2 || got[0] != send(0, 10) {
		t.Fatalf("with 0 in flight, 1 must wait: %v", got)
	}
	got = step(t, s, Acked([]Range{{0, 0}}, ms))
	if len(got) != 4 || got[2] != send(1, 500) {
		t.Fatalf("alone, the big message goes: %v", got)
	}
	if s.State() != StateBlocked {
		t.Fatalf("2 must wait behind the big message, state %v", s.State())
	}
	step(t, s, Acked([]Range{{1, 1}}, 2*ms))
	// 2 goes under the waiver too (sent bytes 510 > 50), leaving no message
	// credit for 3.
	got = step(t, s, Spooled(3, 1, 2*ms))
	if s.State() != StateBlocked || len(got) != 0 {
		t.Fatalf("3 needs message credit: state %v, %v", s.State(), got)
	}
	if m, _ := s.InFlight(); m != 1 {
		t.Fatalf("in flight %d, want 1", m)
	}
}

// Reconnect back-off: doubles per failure, capped, spread by jitter, and
// reset by an ack on a working stream (not by Connected alone).
func TestSenderReconnectBackoff(t *testing.T) {
	s := newTestSender(t, SenderConfig{ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second})
	var got []time.Duration
	for range 6 {
		a := step(t, s, Disconnected(0.5, 0))
		got = append(got, a[0].After)
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(got, want) {
		t.Fatalf("back-off %v, want %v", got, want)
	}
	if a := step(t, s, Disconnected(0, 0)); a[0].After != 800*time.Millisecond {
		t.Fatalf("jitter 0: %v, want 0.8 × 1s", a[0].After)
	}
	if a := step(t, s, Disconnected(0.999999999, 0)); a[0].After < 1199*time.Millisecond {
		t.Fatalf("jitter ~1: %v, want ~1.2 × 1s", a[0].After)
	}
	step(t, s, Connected(10, 1<<20, 0))
	if a := step(t, s, Disconnected(0.5, 0)); a[0].After != time.Second {
		t.Fatalf("Connected alone reset the back-off: %v", a[0].After)
	}
	step(t, s, Connected(10, 1<<20, 0), Spooled(0, 1, 0), Acked([]Range{{0, 0}}, 1))
	if a := step(t, s, Disconnected(0.5, 1)); a[0].After != 100*time.Millisecond {
		t.Fatalf("an ack did not reset the back-off: %v", a[0].After)
	}
}

// A message the sink will never take is parked, not dropped: the rest flows
// past it, the watermark stays below it, and the next stream retries it.
func TestSenderParked(t *testing.T) {
	s := newTestSender(t, tableSenderConfig)
	step(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0), Spooled(1, 10, 0))
	step(t, s, Rejected(0, false, ms), Acked([]Range{{1, 1}}, ms))
	if s.Watermark() != 0 || s.State() != StateIdle || s.Stats().Parked != 1 {
		t.Fatalf("watermark %d state %v stats %+v", s.Watermark(), s.State(), s.Stats())
	}
	step(t, s, Disconnected(0, 2*ms))
	got := step(t, s, Connected(100, 1<<20, 3*ms))
	if len(got) != 2 || got[0] != send(0, 10) {
		t.Fatalf("parked message not retried on the next stream: %v", got)
	}
	step(t, s, Acked([]Range{{0, 0}}, 4*ms))
	if s.Watermark() != 2 {
		t.Fatalf("watermark %d, want 2", s.Watermark())
	}
}

// Steps between Ready and Advance keep their actions for the next Ready.
func TestSenderReadyAdvance(t *testing.T) {
	s := newTestSender(t, tableSenderConfig)
	if err := s.Step(Connected(100, 1<<20, 0)); err != nil {
		t.Fatal(err)
	}
	s.Step(Spooled(0, 1, 0))
	first := s.Ready()
	s.Step(Spooled(1, 1, 0))
	if want := []Action{send(0, 1), arm(0, 1, int64(time.Second))}; !slices.Equal(first, want) {
		t.Fatalf("first Ready %v, want %v", first, want)
	}
	s.Advance()
	if got, want := s.Ready(), []Action{send(1, 1), arm(1, 1, int64(time.Second))}; !slices.Equal(got, want) {
		t.Fatalf("second Ready %v, want %v", got, want)
	}
	s.Advance()
	if s.HasReady() || len(s.Ready()) != 0 {
		t.Fatal("actions left after Advance")
	}
}

// Now going backwards is clamped to the latest Now seen.
func TestSenderClockClamp(t *testing.T) {
	s := newTestSender(t, tableSenderConfig)
	step(t, s, Connected(100, 1<<20, 50*ms))
	got := step(t, s, Spooled(0, 1, 10*ms))
	if got[1].At != 50*ms+int64(time.Second) {
		t.Fatalf("deadline %d from a clock that went backwards", got[1].At)
	}
}

// The auto window starts at the floor, grows with the measured delivery rate
// (doubling per round trip while the window is the bottleneck), and settles
// near twice the bandwidth-delay product.
func TestSenderAutoWindow(t *testing.T) {
	const (
		size    = 1 << 10    // bytes per message
		service = ms / 100   // the bottleneck serves 100 messages per ms
		delay   = 10 * ms    // propagation, send to ack
		bdpMsgs = 1000 + 100 // (delay + service-bound queueing floor) × rate, roughly
	)
	s := newTestSender(t, SenderConfig{MinRTO: time.Millisecond})
	step(t, s, Connected(1<<30, 1<<40, 0))
	// acks holds the ack times of messages in flight, in send order; the
	// bottleneck is FIFO, so they are increasing.
	type ack struct {
		id uint64
		at int64
	}
	var acks []ack
	served := int64(0)
	steps := 0
	// do steps ev and records the sends. It checks invariants only now and
	// then: a full check walks the window, which here is thousands deep.
	do := func(ev Event) {
		if err := s.Step(ev); err != nil {
			t.Fatal(err)
		}
		if steps++; steps%1000 == 0 {
			if err := s.checkInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		for _, a := range s.Ready() {
			if a.Kind == ActionSend {
				served = max(served, ev.Now) + service
				acks = append(acks, ack{a.ID, served + delay})
			}
		}
		s.Advance()
	}
	var id uint64
	var grown []int
	for now := int64(0); now < 2*int64(time.Second); {
		for w, _ := s.Window(); s.Outstanding() < w+64; { // never app-limited
			do(Spooled(id, size, now))
			id++
		}
		a := acks[0]
		acks = acks[1:]
		now = a.at
		do(Acked([]Range{{a.id, a.id}}, now))
		if w, _ := s.Window(); len(grown) == 0 || grown[len(grown)-1] < w {
			grown = append(grown, w)
		}
	}
	w, b := s.Window()
	t.Logf("window grew %v; final %d msgs / %d bytes; SRTT %v, minRTT %v", grown, w, b, s.SRTT(), time.Duration(s.win.minRTT))
	if w < bdpMsgs || w > 3*bdpMsgs {
		t.Fatalf("window %d msgs, want within [BDP, 3 BDP], BDP ~ %d", w, bdpMsgs)
	}
	if len(grown) < 5 {
		t.Fatalf("window did not grow by steps: %v", grown)
	}
}

// NextDeadline is the earliest of the resend timers, the reconnect back-off
// and the progress deadline, and Tick fires each once.
func TestSenderTickDeadlines(t *testing.T) {
	sec := int64(time.Second)
	next := func(s *Sender, want int64, wantOK bool) {
		t.Helper()
		if at, ok := s.NextDeadline(); at != want || ok != wantOK {
			t.Fatalf("NextDeadline() = %v, %t; want %v, %t", time.Duration(at), ok, time.Duration(want), wantOK)
		}
	}
	tick := func(s *Sender, now int64, want ...Action) {
		t.Helper()
		if err := s.Tick(now); err != nil {
			t.Fatal(err)
		}
		if err := s.checkInvariants(); err != nil {
			t.Fatal(err)
		}
		if got := s.Ready(); !slices.Equal(got, want) {
			t.Fatalf("Tick(%v) actions\n got %v\nwant %v", time.Duration(now), got, want)
		}
		s.Advance()
	}

	t.Run("resend timers in deadline order, stale ones skipped", func(t *testing.T) {
		s := newTestSender(t, tableSenderConfig)
		next(s, 0, false)
		step(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0), Spooled(1, 10, 50*ms))
		next(s, sec, true)
		step(t, s, Acked([]Range{{0, 0}}, 100*ms)) // RTT 100ms: RTO 300ms; 0's timer is dead
		next(s, 1050*ms, true)
		tick(s, 1049*ms)
		tick(s, 1050*ms, send(1, 10), arm(1, 2, 1050*ms+600*ms)) // backed off: 600ms
		next(s, 1650*ms, true)
	})
	t.Run("dial once per Disconnected", func(t *testing.T) {
		s := newTestSender(t, tableSenderConfig)
		step(t, s, Disconnected(0.5, 0)) // dial failed: back-off 1s
		next(s, sec, true)
		tick(s, sec, dial)
		next(s, 0, false)
		tick(s, 2*sec)
		step(t, s, Disconnected(0.5, 2*sec)) // failed again: 2s
		next(s, 4*sec, true)
		step(t, s, Connected(1, 1, 3*sec)) // dialled early: the pending dial is void
		next(s, 0, false)
		tick(s, 5*sec)
	})
	t.Run("progress deadline", func(t *testing.T) {
		cfg := tableSenderConfig
		cfg.InitialRTO, cfg.ProgressTimeout = 8*time.Second, 3*time.Second
		s := newTestSender(t, cfg)
		step(t, s, Connected(100, 1<<20, 0))
		next(s, 0, false) // nothing in flight: no deadline
		step(t, s, Spooled(0, 10, 10*sec), Spooled(1, 10, 10*sec))
		next(s, 13*sec, true) // from the first send into the empty pipe
		step(t, s, Acked([]Range{{0, 0}}, 12*sec))
		next(s, 15*sec, true) // an ack is progress
		tick(s, 14*sec)
		tick(s, 15*sec, stalled)
		next(s, 18*sec, true) // once per stream: only 1's resend timer is left
		tick(s, 16*sec)
		step(t, s, Disconnected(0.5, 16*sec), Connected(100, 1<<20, 16*sec+int64(cfg.ReconnectMin)))
		next(s, 20*sec, true) // 1 resent at 17s on the new stream
	})
	t.Run("progress deadline survives resends", func(t *testing.T) {
		cfg := tableSenderConfig
		cfg.ProgressTimeout = 3 * time.Second
		s := newTestSender(t, cfg)
		step(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0))
		tick(s, sec, send(0, 10), arm(0, 2, 3*sec))
		next(s, 3*sec, true)
		tick(s, 3*sec, send(0, 10), arm(0, 3, 7*sec), stalled)
	})
}

// TestReplacedWaitsReconnectMax (issue 23): a stream the sink ended for a
// newer session of the same agent id reconnects after ReconnectMax
// (±20% with the jitter) even when the back-off had been reset by an
// ack, so two agents sharing one id do not take it from each other at
// ReconnectMin; an ordinary break after a working stream still redials
// at ReconnectMin.
func TestReplacedWaitsReconnectMax(t *testing.T) {
	cfg := tableSenderConfig
	s := newTestSender(t, cfg)
	step(t, s, Connected(10, 0, 0))
	acts := step(t, s, Replaced(0.5, 0))
	if !slices.Contains(acts, reconnect(cfg.ReconnectMax)) {
		t.Fatalf("Replaced: %v, want %v", acts, reconnect(cfg.ReconnectMax))
	}
	s = newTestSender(t, cfg)
	step(t, s, Connected(10, 0, 0))
	acts = step(t, s, Disconnected(0.5, 0))
	if !slices.Contains(acts, reconnect(cfg.ReconnectMin)) {
		t.Fatalf("Disconnected: %v, want %v", acts, reconnect(cfg.ReconnectMin))
	}
}
