package delivery

// timerEntry is one armed resend timer: ArmTimer{id, attempt} at at.
type timerEntry struct {
	at      int64
	id      uint64
	attempt uint32
}

// timerHeap is a min-heap of resend timers by deadline (see timerQueue). It is typed (not
// container/heap) so that arming a timer never boxes, and so never
// allocates once the slice has grown. Cancelled and stale timers are not
// removed: Step drops them when they reach the top (see pruneTimers), which
// keeps a cancel O(1).
type timerHeap []timerEntry

// before orders timers by deadline, then by id, so that timers due at the
// same time fire in id order whatever the heap's shape: Tick is
// deterministic.
func (e timerEntry) before(o timerEntry) bool {
	return e.at < o.at || e.at == o.at && e.id < o.id
}

func (h *timerHeap) push(e timerEntry) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q[i].before(q[p]) {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && q[r].before(q[l]) {
			c = r
		}
		if !q[c].before(q[i]) {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	*h = q
	return top
}

// timerQueue holds the resend timers: a sorted FIFO for the common case,
// where each deadline is no earlier than the one armed before it (same RTO,
// time moving on), which makes arming and expiring O(1); and a heap for the
// timers that would break the FIFO's order (the RTO shrank after an RTT
// sample). The earliest timer is the earlier of the two heads.
type timerQueue struct {
	fifo []timerEntry
	head int // fifo[head:] is live; fifo[:head] is popped
	heap timerHeap
}

func (q *timerQueue) push(e timerEntry) {
	if q.head == len(q.fifo) {
		q.fifo, q.head = q.fifo[:0], 0
	}
	if n := len(q.fifo); n == q.head || !e.before(q.fifo[n-1]) {
		if q.head > 0 && n == cap(q.fifo) {
			// Slide down instead of growing: the slice stays the size of
			// the largest working set.
			n = copy(q.fifo, q.fifo[q.head:])
			q.fifo, q.head = q.fifo[:n], 0
		}
		q.fifo = append(q.fifo, e)
		return
	}
	q.heap.push(e)
}

func (q *timerQueue) len() int { return len(q.fifo) - q.head + len(q.heap) }

// fromHeap reports whether the earliest timer is the heap's; q is not empty.
func (q *timerQueue) fromHeap() bool {
	return q.head == len(q.fifo) || len(q.heap) > 0 && q.heap[0].before(q.fifo[q.head])
}

// min returns the earliest timer; q is not empty.
func (q *timerQueue) min() timerEntry {
	if q.fromHeap() {
		return q.heap[0]
	}
	return q.fifo[q.head]
}

// pop removes and returns the earliest timer; q is not empty.
func (q *timerQueue) pop() timerEntry {
	if q.fromHeap() {
		return q.heap.pop()
	}
	q.head++
	return q.fifo[q.head-1]
}

func (q *timerQueue) reset() {
	q.fifo, q.head, q.heap = q.fifo[:0], 0, q.heap[:0]
}

// mutation switches off guarantees, for tests that prove the simulation
// notices. Never set outside tests.
var mutation struct {
	// tickSkipsRequeue: Tick drops an expired resend timer without
	// requeueing its message.
	tickSkipsRequeue bool
}

// live reports whether timer e is still armed: its message is in flight
// with the same attempt.
func (s *Sender) live(e timerEntry) bool {
	if e.id < s.base || e.id >= s.next {
		return false
	}
	sl := s.slot(e.id)
	return sl.state == slotInFlight && sl.attempt == e.attempt
}

// pruneTimers drops dead timers from the top of the heap, so that the top,
// if any, is the earliest live deadline.
func (s *Sender) pruneTimers() {
	for s.timers.len() > 0 && !s.live(s.timers.min()) {
		s.timers.pop()
	}
}

// tick fires every deadline at or before now, earliest first: the resend
// timers (each handled exactly like a Timeout event, sends included, so
// that a resend's RTO reflects the back-offs before it), then the reconnect
// back-off and the progress deadline.
func (s *Sender) tick() {
	for s.timers.len() > 0 && s.timers.min().at <= s.now {
		e := s.timers.pop()
		if !s.live(e) {
			continue
		}
		if mutation.tickSkipsRequeue {
			continue
		}
		s.timeout(e.id, e.attempt)
		s.sendWhatFits()
		s.pruneTimers()
	}
	if s.dialPending && s.dialAt <= s.now {
		s.dialPending = false
		s.emit(Action{Kind: ActionDial})
	}
	if s.stalled() {
		s.stallSignalled = true
		s.emit(Action{Kind: ActionStalled})
	}
}

// owed reports whether the current stream owes the Sender progress:
// messages are in flight, or queued messages wait for credit (with
// nothing in flight, only credit can hold them back). The second matters:
// a sink whose storage is stuck fills its queue, so its credits run out
// and it acks nothing; the resend timers then requeue everything in
// flight and none of it may go. Counting only messages in flight, the
// stream would hang there for ever instead of failing over.
func (s *Sender) owed() bool {
	if !s.connected {
		return false
	}
	if s.inflightMsgs > 0 {
		return true
	}
	_, _, queued := s.peek()
	return queued
}

// progressDeadline is when the current stream will be declared stalled:
// ProgressTimeout after the last progress (Connected, an Acked, or the
// last event that found the stream owing nothing), while the stream owes
// something (see owed).
func (s *Sender) progressDeadline() (int64, bool) {
	if s.cfg.ProgressTimeout <= 0 || s.stallSignalled || !s.owed() {
		return 0, false
	}
	return s.progressAt + int64(s.cfg.ProgressTimeout), true
}

func (s *Sender) stalled() bool {
	at, ok := s.progressDeadline()
	return ok && at <= s.now
}

// NextDeadline returns the earliest time at which Tick has something to
// do: a resend timer, the reconnect back-off or the progress deadline. A
// driver keeps exactly one timer, set to it after every Step; ok is false
// when nothing is pending. Ticking earlier than the deadline does nothing,
// ticking later fires everything due.
func (s *Sender) NextDeadline() (at int64, ok bool) {
	if s.timers.len() > 0 {
		at, ok = s.timers.min().at, true
	}
	if s.dialPending && (!ok || s.dialAt < at) {
		at, ok = s.dialAt, true
	}
	if p, pok := s.progressDeadline(); pok && (!ok || p < at) {
		at, ok = p, true
	}
	return at, ok
}

// Tick steps an EventTick at now: it fires every deadline at or before now.
func (s *Sender) Tick(now int64) error { return s.Step(Tick(now)) }
