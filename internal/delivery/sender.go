package delivery

import (
	"fmt"
	"math"
	"time"
)

// SenderState is the Sender's state; see the Sender state table in doc.go.
type SenderState uint8

const (
	// StateDisconnected: no stream. Spooled messages queue up.
	StateDisconnected SenderState = iota
	// StateIdle: connected; nothing queued, nothing in flight (parked
	// messages, if any, wait for the next stream).
	StateIdle
	// StateCanSend: connected; messages in flight and none waiting, so the
	// next Spooled is sent at once if the window and credits allow it.
	StateCanSend
	// StateBlocked: connected; messages wait because the window or the
	// sink's credits are used up.
	StateBlocked
)

var senderStateNames = [...]string{
	StateDisconnected: "Disconnected",
	StateIdle:         "Idle",
	StateCanSend:      "CanSend",
	StateBlocked:      "Blocked",
}

func (s SenderState) String() string {
	if int(s) < len(senderStateNames) {
		return senderStateNames[s]
	}
	return fmt.Sprintf("SenderState(%d)", uint8(s))
}

// Sender is the agent side of delivery: it decides what to send when, and
// tracks every message from Spooled until it is acknowledged. It is not safe
// for concurrent use; a driver owns it from one goroutine.
//
// Driver loop (see doc.go): Step every event, then carry out Ready() in
// order, then Advance().
type Sender struct {
	cfg SenderConfig

	// ring holds one slot for every id in [base, next): spooled and not yet
	// below the watermark.
	ring ring
	// base is the watermark: every id below it is acknowledged, base itself
	// (if < next) is not. Invariant: base <= scan <= fresh <= next.
	base uint64
	// next is the id the next Spooled must carry.
	next uint64
	// fresh: no id in [fresh, next) has ever been sent.
	fresh uint64
	// scan: no id in [base, scan) is queued. It only serves resends, so it
	// is meaningful only while resend > 0.
	scan uint64
	// resend counts queued slots below fresh (to be sent again). Zero lets
	// peek skip the scan of the in-flight region entirely.
	resend int
	// parked counts slots in slotParked.
	parked int

	// inflightMsgs/Bytes sum the slots in slotInFlight.
	inflightMsgs  int
	inflightBytes int64

	connected bool
	// creditMsgs and creditBytes are the sink's cumulative limits for the
	// current stream, and sentMsgs and sentBytes count every send on it,
	// resends included, exactly as the Receiver counts what it receives.
	// Invariant: sentMsgs <= creditMsgs; sentBytes <= creditBytes except
	// after a send under the empty-pipe waiver (see fits).
	creditMsgs, creditBytes uint64
	sentMsgs, sentBytes     uint64

	// deliveredBytes and deliveredMsgs count every message acked, for the
	// delivery-rate samples of the auto window.
	deliveredBytes, deliveredMsgs int64
	// appLimitedUntil, when not zero, is the deliveredMsgs count at which
	// the current app-limited bubble will have been delivered; sends
	// before then are marked appLimited.
	appLimitedUntil int64

	now int64 // the largest Event.Now seen
	rtt rttEstimator
	win window

	// failures counts connection failures since the last stream on which
	// an ack arrived; it is the exponent of the reconnect back-off.
	failures int

	// timers holds the resend deadline of every message in flight (and
	// dead ones not yet at the top); see deadlines.go.
	timers timerQueue
	// dialPending: a Disconnected scheduled a dial at dialAt, which Tick
	// turns into ActionDial.
	dialPending bool
	dialAt      int64
	// progressAt is when the current stream last made progress; with
	// ProgressTimeout, a stream with messages in flight and no progress
	// for that long is stalled (Tick emits ActionStalled once).
	progressAt     int64
	stallSignalled bool

	state   SenderState
	stats   Stats
	actions []Action
	readyN  int // len of the last Ready(); see Advance
}

// NewSender returns a Disconnected Sender whose watermark is
// cfg.Watermark. The driver dials at once (no Reconnect action is emitted
// for the first dial) and re-feeds every spooled id >= cfg.Watermark.
func NewSender(cfg SenderConfig) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := cfg.Watermark
	return &Sender{
		cfg:  cfg,
		base: w, next: w, fresh: w, scan: w,
		rtt:     newRTTEstimator(cfg.InitialRTO, cfg.MinRTO, cfg.MaxRTO),
		win:     newWindow(cfg.MaxInFlightMsgs, cfg.MaxInFlightBytes),
		actions: make([]Action, 0, 64),
	}, nil
}

// Step applies one event. Errors wrap ErrInvalidEvent and leave the Sender
// unchanged; stale events (timeouts of acked or resent sends, credits and
// rejections after the stream broke) are not errors and are ignored.
func (s *Sender) Step(ev Event) error {
	if err := s.check(ev); err != nil {
		return err
	}
	s.now = max(s.now, ev.Now)
	s.win.tick(s.now)
	if s.connected && !s.owed() {
		// The stream owed nothing until now: an idle stream owes no acks,
		// so the progress clock starts with whatever this event sends.
		s.progressAt = s.now
	}
	switch ev.Kind {
	case EventSpooled:
		s.ring.push(slot{size: ev.Size})
		s.next++
		s.win.observeSize(ev.Size)
	case EventAcked:
		if s.connected {
			s.progressAt = s.now // any ack shows the stream and the sink work
		}
		s.ack(ev.Ranges)
	case EventTimeout:
		s.timeout(ev.ID, ev.Attempt)
	case EventCredits:
		if s.connected { // else stale: the stream it was for is gone
			s.creditMsgs = max(s.creditMsgs, ev.MsgLimit)
			s.creditBytes = max(s.creditBytes, ev.ByteLimit)
		}
	case EventConnected:
		s.connect(ev.MsgLimit, ev.ByteLimit)
	case EventDisconnected:
		s.disconnect(ev.Jitter, ev.Replaced)
	case EventRejected:
		s.reject(ev.ID, ev.Retryable)
	case EventTick:
		s.tick()
	case EventSetAside:
		s.setAside(ev.ID)
	}
	s.sendWhatFits()
	switch ev.Kind {
	case EventAcked, EventTimeout, EventRejected, EventTick:
		// The only events that settle or requeue messages in flight,
		// leaving their timers dead; keep a live one at the top.
		s.pruneTimers()
	}
	s.state = s.computeState()
	return nil
}

// check validates ev against the current state without changing anything.
func (s *Sender) check(ev Event) error {
	switch ev.Kind {
	case EventSpooled:
		switch {
		case ev.ID != s.next:
			return fmt.Errorf("%w: Spooled id %d, want %d (ids are contiguous)", ErrInvalidEvent, ev.ID, s.next)
		case ev.ID == math.MaxUint64:
			return fmt.Errorf("%w: Spooled id %d: id space exhausted", ErrInvalidEvent, ev.ID)
		case ev.Size < 0:
			return fmt.Errorf("%w: Spooled id %d with negative size %d", ErrInvalidEvent, ev.ID, ev.Size)
		}
	case EventAcked:
		if !validRanges(ev.Ranges) {
			return fmt.Errorf("%w: Acked range with First > Last", ErrInvalidEvent)
		}
	case EventTimeout:
		switch {
		case ev.ID >= s.next:
			return fmt.Errorf("%w: Timeout for id %d never spooled", ErrInvalidEvent, ev.ID)
		case ev.Attempt == 0 || ev.ID >= s.base && ev.Attempt > s.slot(ev.ID).attempt:
			return fmt.Errorf("%w: Timeout for id %d attempt %d never armed", ErrInvalidEvent, ev.ID, ev.Attempt)
		}
	case EventCredits:
	case EventConnected:
		if s.connected {
			return fmt.Errorf("%w: Connected while connected (Disconnected must come first)", ErrInvalidEvent)
		}
	case EventDisconnected:
		if !(ev.Jitter >= 0 && ev.Jitter < 1) {
			return fmt.Errorf("%w: Disconnected jitter %g outside [0, 1)", ErrInvalidEvent, ev.Jitter)
		}
	case EventRejected:
		if ev.ID >= s.next {
			return fmt.Errorf("%w: Rejected id %d never spooled", ErrInvalidEvent, ev.ID)
		}
	case EventSetAside:
		if ev.ID >= s.next {
			return fmt.Errorf("%w: SetAside id %d never spooled", ErrInvalidEvent, ev.ID)
		}
	case EventTick:
	default:
		return fmt.Errorf("%w: unknown kind %v", ErrInvalidEvent, ev.Kind)
	}
	return nil
}

// ack marks the outstanding ids in ranges acknowledged. Ids below the
// watermark, not yet spooled or already acked are ignored. An ack is a
// statement that the ids are durable, so it settles an id whatever its
// state: in flight, queued for resend after a timeout or a broken stream,
// or parked.
func (s *Sender) ack(ranges []Range) {
	var n int
	var sampleID uint64
	sampled := false
	for _, r := range ranges {
		if s.base == s.next {
			break
		}
		// hi < next <= MaxUint64, so id++ cannot wrap.
		lo, hi := max(r.First, s.base), min(r.Last, s.next-1)
		for id := lo; id <= hi; id++ {
			sl := s.slot(id)
			switch sl.state {
			case slotAcked:
				continue
			case slotInFlight:
				s.leaveFlight(sl)
				s.emit(Action{Kind: ActionCancelTimer, ID: id, Attempt: sl.attempt})
			case slotQueued:
				if id < s.fresh {
					s.resend--
				}
			case slotParked:
				s.parked--
			}
			sl.state = slotAcked
			s.deliveredBytes += sl.size
			s.deliveredMsgs++
			n++
			// Karn: a message sent more than once has an ambiguous RTT.
			// Of the rest, the newest was sent last, so its RTT includes
			// the least waiting for the group commit that acked the batch.
			if sl.attempt == 1 && (!sampled || id > sampleID) {
				sampleID, sampled = id, true
			}
		}
	}
	if n == 0 {
		return
	}
	if s.appLimitedUntil != 0 && s.deliveredMsgs > s.appLimitedUntil {
		s.appLimitedUntil = 0 // the bubble has been delivered
	}
	s.stats.Acked += uint64(n)
	if s.connected {
		s.failures = 0 // this stream works: reset the reconnect back-off
	}
	if sampled {
		sl := s.slot(sampleID)
		rtt := time.Duration(s.now - sl.sentAt)
		s.rtt.sample(rtt)
		s.win.onSample(s.now, rtt, s.rtt.srtt, s.now-sl.sentAt,
			s.deliveredBytes-sl.deliveredBytes, s.deliveredMsgs-sl.deliveredMsgs, sl.appLimited)
	}
	s.advanceBase()
}

// advanceBase moves the watermark past the settled slots at its front.
func (s *Sender) advanceBase() {
	old := s.base
	for s.ring.n > 0 && s.ring.at(0).state == slotAcked {
		s.ring.pop()
		s.base++
	}
	if s.base != old {
		s.fresh, s.scan = max(s.fresh, s.base), max(s.scan, s.base)
		s.emit(Action{Kind: ActionMarkAcked, Watermark: s.base})
	}
}

// setAside settles parked message id, which the driver copied out of the
// spool (a dead letter): the sink refused it for good, and the segments
// it holds below the watermark are needed. It is not delivered, so it
// neither counts in the delivery-rate samples nor resets the back-off.
func (s *Sender) setAside(id uint64) {
	if id < s.base {
		return
	}
	sl := s.slot(id)
	if mutationSetAsideAny && sl.state != slotParked && sl.state != slotAcked {
		if sl.state == slotInFlight {
			s.leaveFlight(sl)
		} else if sl.state == slotQueued && id < s.fresh {
			s.resend--
		}
		sl.state = slotAcked
		s.advanceBase()
		return
	}
	if sl.state != slotParked {
		return // acked since, or a new stream unparked it
	}
	s.parked--
	sl.state = slotAcked
	s.stats.SetAside++
	s.advanceBase()
}

func (s *Sender) timeout(id uint64, attempt uint32) {
	if id < s.base {
		return // acked since
	}
	sl := s.slot(id)
	if sl.state != slotInFlight || sl.attempt != attempt {
		return // acked, requeued or resent since
	}
	if mutationNoTimeoutRequeue {
		return
	}
	s.requeue(id, sl)
	s.stats.Timeouts++
	s.rtt.backoff(sl.sentAt, s.now)
}

func (s *Sender) reject(id uint64, retryable bool) {
	if !s.connected || id < s.base {
		return
	}
	sl := s.slot(id)
	if sl.state != slotInFlight {
		return // a timeout requeued it, or it was acked
	}
	s.stats.Rejected++
	s.emit(Action{Kind: ActionCancelTimer, ID: id, Attempt: sl.attempt})
	if retryable {
		s.requeue(id, sl)
		return
	}
	s.stats.Parked++
	s.leaveFlight(sl)
	sl.state = slotParked
	s.parked++
}

func (s *Sender) connect(msgLimit, byteLimit uint64) {
	s.connected = true
	s.dialPending = false // the driver dialled without waiting for the Dial
	s.progressAt, s.stallSignalled = s.now, false
	s.creditMsgs, s.creditBytes = msgLimit, byteLimit
	s.sentMsgs, s.sentBytes = 0, 0
	for id := s.base; s.parked > 0 && id < s.fresh; id++ {
		if sl := s.slot(id); sl.state == slotParked {
			sl.state = slotQueued
			s.parked--
			s.resend++
		}
	}
	s.scan = s.base
}

// disconnect handles a broken stream or a failed dial (when already
// disconnected): everything in flight goes back to the queue, to be resent
// first, in id order, on the next stream. replaced: the sink gave the
// agent id to a newer session; wait ReconnectMax before dialing.
func (s *Sender) disconnect(jitter float64, replaced bool) {
	if s.connected {
		s.connected = false
		if s.inflightMsgs > 0 {
			for id := s.base; s.inflightMsgs > 0; id++ {
				if sl := s.slot(id); sl.state == slotInFlight {
					s.requeue(id, sl)
				}
			}
			s.emit(Action{Kind: ActionCancelAllTimers})
		}
		s.timers.reset() // all dead: nothing is in flight
	}
	after := s.reconnectDelay(jitter)
	if replaced {
		after = time.Duration(float64(s.cfg.ReconnectMax) * (0.8 + 0.4*jitter))
	}
	s.emit(Action{Kind: ActionReconnect, After: after})
	s.dialPending, s.dialAt = true, s.now+int64(after)
	s.failures++
}

// reconnectDelay is ReconnectMin doubled per consecutive failure, capped at
// ReconnectMax, then spread by ±20% with the driver's jitter, as in gRPC's
// connection back-off, so that agents cut off together do not redial in
// lockstep.
func (s *Sender) reconnectDelay(jitter float64) time.Duration {
	d, hi := s.cfg.ReconnectMin, s.cfg.ReconnectMax
	for i := 0; i < s.failures && d < hi; i++ {
		if d > hi/2 {
			d = hi
			break
		}
		d *= 2
	}
	return time.Duration(float64(d) * (0.8 + 0.4*jitter))
}

func (s *Sender) requeue(id uint64, sl *slot) {
	s.leaveFlight(sl)
	sl.state = slotQueued
	s.resend++
	s.scan = min(s.scan, id)
}

func (s *Sender) leaveFlight(sl *slot) {
	s.inflightMsgs--
	s.inflightBytes -= sl.size
}

func (s *Sender) sendWhatFits() {
	for s.connected {
		id, sl, ok := s.peek()
		if !ok {
			// Out of messages with the window open: until what is in
			// flight now is acked, delivery is limited by the
			// application (BBR's C.app_limited).
			s.appLimitedUntil = max(s.deliveredMsgs+int64(s.inflightMsgs), 1)
			return
		}
		if !s.fits(sl.size) {
			return
		}
		s.send(id, sl)
	}
}

// peek returns the lowest queued id: sends go out in id order, resends
// first since their ids are lower. It only moves the cursors past slots
// that are not queued, so calling it without sending is harmless.
func (s *Sender) peek() (uint64, *slot, bool) {
	if s.resend > 0 {
		for ; s.scan < s.fresh; s.scan++ {
			if sl := s.slot(s.scan); sl.state == slotQueued {
				return s.scan, sl, true
			}
		}
	}
	for ; s.fresh < s.next; s.fresh++ {
		// Never-sent ids are queued unless an ack settled them anyway.
		if sl := s.slot(s.fresh); sl.state == slotQueued {
			return s.fresh, sl, true
		}
	}
	return 0, nil, false
}

// fits reports whether a message of size bytes may be sent now: both the
// sink's credits and the Sender's window must allow it.
//
// Message limits are hard. Byte limits are waived while nothing is in
// flight: a message bigger than the remaining byte credit (or than the
// whole window) would otherwise wait for credit that only an ack of
// something in flight could bring, which is a deadlock. The Receiver grants
// the same waiver to a message reaching an empty queue. The two views can
// differ (the sink may still queue a copy of a message whose timer fired
// here); the message is then Rejected as retryable and sent again, which
// costs a round trip but loses nothing.
func (s *Sender) fits(size int64) bool {
	if s.sentMsgs >= s.creditMsgs || s.win.msgs > 0 && s.inflightMsgs >= s.win.msgs && !mutationWindowOverrun {
		return false
	}
	if s.inflightMsgs == 0 {
		return true
	}
	if s.sentBytes+uint64(size) > s.creditBytes {
		return false
	}
	return s.win.bytes == 0 || s.inflightBytes+size <= s.win.bytes
}

func (s *Sender) send(id uint64, sl *slot) {
	if id >= s.fresh {
		s.fresh = id + 1
	} else {
		s.resend--
	}
	sl.attempt++
	sl.state = slotInFlight
	sl.sentAt = s.now
	sl.deliveredBytes, sl.deliveredMsgs = s.deliveredBytes, s.deliveredMsgs
	sl.appLimited = s.appLimitedUntil != 0
	s.inflightMsgs++
	s.inflightBytes += sl.size
	s.sentMsgs++
	s.sentBytes += uint64(sl.size)
	s.stats.Sent++
	if sl.attempt > 1 {
		s.stats.Resent++
	}
	s.emit(Action{Kind: ActionSend, ID: id, Size: sl.size})
	at := s.now + int64(s.rtt.rto)
	s.timers.push(timerEntry{at: at, id: id, attempt: sl.attempt})
	s.emit(Action{Kind: ActionArmTimer, ID: id, Attempt: sl.attempt, At: at})
}

func (s *Sender) computeState() SenderState {
	if !s.connected {
		return StateDisconnected
	}
	if _, _, queued := s.peek(); queued {
		return StateBlocked // sendWhatFits left it queued
	}
	if s.inflightMsgs > 0 {
		return StateCanSend
	}
	return StateIdle
}

func (s *Sender) slot(id uint64) *slot { return s.ring.at(id - s.base) }

func (s *Sender) emit(a Action) { s.actions = append(s.actions, a) }

// Ready returns the actions produced since the last Advance, in the order
// the driver must carry them out. The slice is owned by the Sender and
// valid until Advance. Steps taken between Ready and Advance are fine:
// their actions are kept for the next Ready.
func (s *Sender) Ready() []Action {
	s.readyN = len(s.actions)
	return s.actions[:s.readyN:s.readyN]
}

// HasReady reports whether Ready would return any action.
func (s *Sender) HasReady() bool { return len(s.actions) > 0 }

// Advance discards the actions returned by the last Ready.
func (s *Sender) Advance() {
	n := copy(s.actions, s.actions[s.readyN:])
	s.actions = s.actions[:n]
	s.readyN = 0
}

// State returns the state after the last Step.
func (s *Sender) State() SenderState { return s.state }

// InFlight returns the messages sent on the current stream and neither
// acknowledged, nor timed out, nor rejected.
func (s *Sender) InFlight() (msgs int, bytes int64) { return s.inflightMsgs, s.inflightBytes }

// Parked is how many messages are refused for good on this session (by
// the sink, or by the driver for one it cannot send) and wait for the
// next: each holds the watermark below it.
func (s *Sender) Parked() int { return s.parked }

// AppendParked appends the ids of the parked messages to dst, ascending.
func (s *Sender) AppendParked(dst []uint64) []uint64 {
	found := 0
	for id := s.base; found < s.parked && id < s.fresh; id++ {
		if s.slot(id).state == slotParked {
			dst = append(dst, id)
			found++
		}
	}
	return dst
}

// Outstanding returns the number of spooled messages at or above the
// watermark: queued, in flight, parked, or acked above an unacked id. A
// driver with a deep spool may feed Spooled lazily, keeping this near the
// window, to bound the Sender's memory (one 48-byte slot per message).
func (s *Sender) Outstanding() int { return s.ring.n }

// Watermark returns the lowest unacknowledged id: every id below it is
// acknowledged. With nothing outstanding it is the next id to be spooled.
func (s *Sender) Watermark() uint64 { return s.base }

// RTO returns the current retransmission timeout, back-off included.
func (s *Sender) RTO() time.Duration { return s.rtt.rto }

// SRTT returns the smoothed round-trip time, zero before the first sample.
func (s *Sender) SRTT() time.Duration { return s.rtt.srtt }

// Window returns the Sender's own in-flight limits; zero is unlimited.
func (s *Sender) Window() (msgs int, bytes int64) { return s.win.msgs, s.win.bytes }

// Stats returns the counters.
func (s *Sender) Stats() Stats { return s.stats }
