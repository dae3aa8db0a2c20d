package delivery

// slotState is where one outstanding message stands.
type slotState uint8

const (
	// slotQueued: waiting to be sent, for the first time or again.
	slotQueued slotState = iota
	// slotInFlight: sent on the current stream, timer armed, not acked.
	slotInFlight
	// slotParked: this sink refused it for good (Rejected, not retryable).
	// It is not resent on this stream but is requeued on the next
	// Connected, since a message is never dropped: the new sink (or the
	// same one, reconfigured) may take it.
	slotParked
	// slotAcked: durably stored by the sink. Removed once no lower id is
	// outstanding, which is what moves the watermark.
	slotAcked
)

// slot is the Sender's record of one message. It is a value in a ring, so
// queueing a message costs no allocation once the ring has grown to the
// backlog.
type slot struct {
	size int64
	// sentAt is the Now of the latest send.
	sentAt int64
	// deliveredBytes and deliveredMsgs are the Sender's counters of acked
	// bytes and messages at the latest send; see window.go.
	deliveredBytes int64
	deliveredMsgs  int64
	// attempt counts the sends so far and is the Attempt of the latest
	// ArmTimer. Zero: never sent. Karn's rule samples RTT only at 1.
	attempt uint32
	state   slotState
	// appLimited: when this send happened the Sender had run out of
	// messages with room left in its window, so the rate measured on its
	// ack says how fast the application produced, not how fast the path
	// can go (see window.go).
	appLimited bool
}

// ring is a FIFO of slots for the contiguous ids [base, base+n), where base
// is kept by the caller. Ids are contiguous and acked ids leave from the
// front, so a slot is found by its offset from base in O(1).
type ring struct {
	buf  []slot // len(buf) is zero or a power of two
	head int    // index in buf of the slot for base
	n    int    // Invariant: 0 <= n <= len(buf)
}

// at returns the slot at offset i from the front. Invariant: i < n.
func (r *ring) at(i uint64) *slot {
	return &r.buf[(uint64(r.head)+i)&uint64(len(r.buf)-1)]
}

func (r *ring) push(s slot) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = s
	r.n++
}

func (r *ring) pop() {
	r.buf[r.head] = slot{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
}

// grow doubles the buffer. It is the only place the Sender allocates after
// construction, and only while the backlog reaches a new high.
func (r *ring) grow() {
	buf := make([]slot, max(2*len(r.buf), 64))
	for i := range r.n {
		buf[i] = *r.at(uint64(i))
	}
	r.buf, r.head = buf, 0
}
