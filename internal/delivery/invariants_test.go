package delivery

import "testing"

// These tests kill scripts/mutate.sh's delivery mutants: each fails with a
// message that starts with "INVARIANT <category>:", which the script greps
// for, so a mutant counts as killed only by the guarantee it breaks. They
// drive the pure Sender on virtual time: nothing waits.

// stepAll applies evs and returns every action they produced.
func stepAll(t *testing.T, s *Sender, evs ...Event) []Action {
	t.Helper()
	var acts []Action
	for _, ev := range evs {
		if err := s.Step(ev); err != nil {
			t.Fatalf("Step(%v): %v", ev, err)
		}
		acts = append(acts, s.Ready()...)
		s.Advance()
	}
	return acts
}

func sentIDs(acts []Action) []uint64 {
	var ids []uint64
	for _, a := range acts {
		if a.Kind == ActionSend {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// TestTimeoutResendsLostMessage: a message whose send was lost on a
// session that stays up is sent again when its resend timer fires;
// without that it is never delivered (mutation_notimeoutrequeue).
func TestTimeoutResendsLostMessage(t *testing.T) {
	s := newTestSender(t, tableSenderConfig)
	acts := stepAll(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0))
	var attempt uint32
	for _, a := range acts {
		if a.Kind == ActionArmTimer && a.ID == 0 {
			attempt = a.Attempt
		}
	}
	if got := sentIDs(acts); len(got) != 1 || attempt == 0 {
		t.Fatalf("setup: sent %v, timer attempt %d", got, attempt)
	}
	// The send is lost: no ack comes; the timer fires.
	at, _ := s.NextDeadline()
	acts = stepAll(t, s, Timeout(0, attempt, at), Tick(at))
	if got := sentIDs(acts); len(got) != 1 || got[0] != 0 {
		t.Fatalf("INVARIANT lost: message 0 was not resent after its resend timeout (sent %v, actions %v)", got, acts)
	}
}

// TestSenderStaysWithinWindow: with credits for 100 messages and a window
// of two, the Sender never has more than two in flight
// (mutation_windowoverrun).
func TestSenderStaysWithinWindow(t *testing.T) {
	s := newTestSender(t, tableSenderConfig) // MaxInFlightMsgs: 2
	stepAll(t, s, Connected(100, 1<<20, 0))
	for id := range uint64(10) {
		stepAll(t, s, Spooled(id, 10, 0))
		if n, _ := s.InFlight(); n > 2 {
			t.Fatalf("INVARIANT window-exceeded: %d messages in flight with a window of 2", n)
		}
	}
}

// TestSetAsideSettlesOnlyParked: SetAside settles a parked message (the
// driver copied it to the dead-letter log) and nothing else: a stale one,
// for a message in flight or queued again after a new stream unparked it,
// must leave the watermark below it, or a message the sink never stored
// would count as done (mutation_setasideany).
func TestSetAsideSettlesOnlyParked(t *testing.T) {
	s := newTestSender(t, tableSenderConfig)
	stepAll(t, s, Connected(100, 1<<20, 0), Spooled(0, 10, 0), Spooled(1, 10, 0), Rejected(0, false, 0))
	// 0 parked, 1 in flight. A new stream unparks 0 and sends it again.
	stepAll(t, s, Disconnected(0.5, 0))
	stepAll(t, s, Connected(100, 1<<20, 0))
	stepAll(t, s, SetAside(0, 0), SetAside(1, 0))
	if w := s.Watermark(); w != 0 {
		t.Fatalf("INVARIANT lost: a stale SetAside moved the watermark to %d past messages in flight", w)
	}
	stepAll(t, s, Rejected(0, false, 0), SetAside(0, 0))
	if w := s.Watermark(); w != 1 {
		t.Fatalf("SetAside of the parked message 0: watermark %d, want 1", w)
	}
}
