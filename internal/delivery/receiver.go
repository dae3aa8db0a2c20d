package delivery

import (
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/protocol"
)

// ReceiverState is the Receiver's state; see the Receiver state table in
// doc.go. (The names carry a Receiver prefix because the Sender's states
// own the State prefix.)
type ReceiverState uint8

const (
	// ReceiverHandshaking: stream open, Hello not yet received.
	ReceiverHandshaking ReceiverState = iota
	// ReceiverReceiving: the queue has room, so credits are available.
	ReceiverReceiving
	// ReceiverBlocked: the queue is full (by count or bytes), so the
	// credits granted so far are used up until the storage writer catches
	// up.
	ReceiverBlocked
	// ReceiverClosed: the stream ended or failed; further events are
	// ignored.
	ReceiverClosed
)

var receiverStateNames = [...]string{
	ReceiverHandshaking: "Handshaking",
	ReceiverReceiving:   "Receiving",
	ReceiverBlocked:     "Blocked",
	ReceiverClosed:      "Closed",
}

func (s ReceiverState) String() string {
	if int(s) < len(receiverStateNames) {
		return receiverStateNames[s]
	}
	return fmt.Sprintf("ReceiverState(%d)", uint8(s))
}

// ProtocolVersion is the version this package speaks: the protocol's,
// defined once in internal/protocol.
const ProtocolVersion = protocol.Version

// Defaults for zero ReceiverConfig fields: the sink's (internal/defaults),
// so that every layer has the same ones.
const (
	DefaultQueueMsgs       = defaults.QueueMessages
	DefaultQueueBytes      = defaults.QueueBytes
	DefaultMaxMessageBytes = defaults.SinkMaxMessage
)

// ReceiverConfig configures a Receiver. The zero value is valid.
type ReceiverConfig struct {
	// QueueMsgs and QueueBytes are the capacity of the stream's queue of
	// messages handed to the storage writer and not yet stored (defaults
	// 8192 and 64 MiB, the sink's). They are the credits granted at the
	// handshake.
	QueueMsgs  int
	QueueBytes int64
	// MaxMessageBytes is the largest message accepted (default 4 MiB).
	// It may exceed QueueBytes: a message bigger than the queue is
	// admitted when the queue is empty.
	MaxMessageBytes int64
	// MinVersion and MaxVersion bound the protocol versions accepted in
	// Hello (default ProtocolVersion for both).
	MinVersion, MaxVersion uint32
}

func (c *ReceiverConfig) setDefaults() {
	if c.QueueMsgs == 0 {
		c.QueueMsgs = DefaultQueueMsgs
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MinVersion == 0 && c.MaxVersion == 0 {
		c.MinVersion, c.MaxVersion = ProtocolVersion, ProtocolVersion
	}
}

func (c *ReceiverConfig) validate() error {
	switch {
	case c.QueueMsgs < 0 || c.QueueBytes < 0 || c.MaxMessageBytes < 0:
		return fmt.Errorf("%w: negative queue capacity or MaxMessageBytes", ErrInvalidConfig)
	case c.MinVersion > c.MaxVersion:
		return fmt.Errorf("%w: MinVersion %d > MaxVersion %d", ErrInvalidConfig, c.MinVersion, c.MaxVersion)
	}
	return nil
}

// ReceiverStats are cumulative counters over the stream's life.
type ReceiverStats struct {
	Received   uint64 // Received and Discarded events after Hello
	Discarded  uint64 // refused by the driver's validation
	Enqueued   uint64
	Duplicates uint64 // Received for an id already queued: dropped
	OverCredit uint64 // rejected with ReasonOverCredit
	Oversize   uint64 // rejected with ReasonOversize
	Acked      uint64 // ids in Ack actions, summed over them
}

// Receiver is the sink side of delivery for one stream: it admits messages
// into a bounded queue in front of the storage writer, acks what the writer
// stored, and grants credits so that a well-behaved Sender never overflows
// the queue. It does not deduplicate: the storage writer does, and reports
// duplicates as Stored so that they are acked. Not safe for concurrent use.
type Receiver struct {
	cfg ReceiverConfig

	helloDone bool
	closed    bool

	// queue maps every enqueued, not yet stored id to its size.
	// Invariant: len(queue) <= cfg.QueueMsgs.
	queue map[uint64]int64
	// queuedBytes sums the queue. Invariant: queuedBytes <= cfg.QueueBytes,
	// or the queue holds one message admitted under the empty-queue
	// waiver (see receive).
	queuedBytes int64

	// receivedMsgs and receivedBytes count every message received since
	// Hello, whatever became of it (queued, stored, duplicate or
	// rejected): the Sender counts every send the same way, so the two
	// counters agree on a stream that loses nothing.
	receivedMsgs, receivedBytes uint64

	// msgLimit and byteLimit are the cumulative credits last advertised
	// (Welcome or Grant). The credit invariant, re-established at the end
	// of every Step:
	//
	//	msgLimit  = receivedMsgs  + (QueueMsgs  − queuedMsgs)
	//	byteLimit = receivedBytes + (QueueBytes − queuedBytes)
	//
	// so the credit left to the Sender, limit − sent, is exactly the free
	// room in the queue, and a Sender within its credits never overflows
	// the queue. Both only grow: receiving a message raises received and
	// queued alike, storing one shrinks queued, and a message that is not
	// queued (duplicate or rejected) raises received only, which hands its
	// credit back to the Sender.
	msgLimit, byteLimit uint64

	stats   ReceiverStats
	actions []ReceiverAction
	readyN  int
	// ranges backs the Ranges of pending Ack actions; reset once they are
	// all advanced.
	ranges []Range
	ids    []uint64 // scratch for sorting Stored ids
}

// NewReceiver returns a Receiver in ReceiverHandshaking.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Receiver{
		cfg:     cfg,
		queue:   make(map[uint64]int64, min(cfg.QueueMsgs, 4096)),
		actions: make([]ReceiverAction, 0, 16),
	}, nil
}

// Step applies one event. Errors wrap ErrInvalidEvent and leave the
// Receiver unchanged. Once Closed, every event is ignored: the storage
// writer may still report ids of a stream that is gone.
func (r *Receiver) Step(ev ReceiverEvent) error {
	switch ev.Kind {
	case EventHello, EventClose:
	case EventReceived, EventDiscarded:
		if ev.Size < 0 {
			return fmt.Errorf("%w: %v id %d with negative size %d", ErrInvalidEvent, ev.Kind, ev.ID, ev.Size)
		}
	case EventStored:
		if !r.helloDone && !r.closed {
			return fmt.Errorf("%w: Stored before Hello: nothing was enqueued", ErrInvalidEvent)
		}
	default:
		return fmt.Errorf("%w: unknown kind %v", ErrInvalidEvent, ev.Kind)
	}
	if r.closed {
		return nil
	}
	switch ev.Kind {
	case EventHello:
		r.hello(ev.Version)
	case EventReceived:
		r.receive(ev.ID, ev.Size)
	case EventDiscarded:
		r.discard(ev.Size)
	case EventStored:
		r.store(ev.IDs)
	case EventClose:
		r.closed = true
	}
	r.grant()
	return nil
}

func (r *Receiver) hello(version uint32) {
	switch {
	case r.helloDone:
		r.fail(ReasonDuplicateHello)
	case version < r.cfg.MinVersion:
		r.fail(ReasonUnsupportedVersion)
	default:
		// A newer agent speaks our version too: the stream uses the
		// highest version both sides know.
		r.helloDone = true
		r.msgLimit, r.byteLimit = r.limits()
		r.emit(ReceiverAction{Kind: ActionWelcome, MsgLimit: r.msgLimit, ByteLimit: r.byteLimit,
			Version: min(version, r.cfg.MaxVersion)})
	}
}

// discard counts a message the driver refused as received, so that its
// credit goes back: the agent counted it as sent.
func (r *Receiver) discard(size int64) {
	if r.count(size) {
		r.stats.Discarded++
	}
}

// count records a message as received (the credit invariant counts every
// message the Sender sent). Before Hello it fails the stream instead and
// reports false.
func (r *Receiver) count(size int64) bool {
	if !r.helloDone {
		r.fail(ReasonNoHello)
		return false
	}
	r.receivedMsgs++
	r.receivedBytes += uint64(size)
	r.stats.Received++
	return true
}

// receive admits a message, or drops or rejects it.
//
// A message over the credits is rejected, not admitted at the expense of an
// older one (the original design dropped the oldest queued message): the
// queued message was already handed to the storage writer, and dropping it
// would break the promise made by Enqueue; rejecting the new one tells the
// Sender exactly which id to resend, and since the Sender resends in id
// order, order is kept as far as it can be. Only a misbehaving Sender, or
// one whose view of the queue is stale (see Sender.fits), gets here.
//
// Like the Sender, the Receiver waives the byte limit for a message reaching
// an empty queue, so a message bigger than QueueBytes but within
// MaxMessageBytes is not rejected forever.
func (r *Receiver) receive(id uint64, size int64) {
	if !r.count(size) {
		return
	}
	n := len(r.queue)
	switch _, dup := r.queue[id]; {
	case size > r.cfg.MaxMessageBytes:
		r.stats.Oversize++
		r.emit(ReceiverAction{Kind: ActionReject, ID: id, Reason: ReasonOversize})
	case dup:
		// A resend after a timeout while the original is still queued:
		// the original will be acked, the copy only hands back its credit.
		r.stats.Duplicates++
	case n >= r.cfg.QueueMsgs || n > 0 && r.queuedBytes+size > r.cfg.QueueBytes:
		r.stats.OverCredit++
		r.emit(ReceiverAction{Kind: ActionReject, ID: id, Reason: ReasonOverCredit})
	default:
		r.queue[id] = size
		r.queuedBytes += size
		r.stats.Enqueued++
		r.emit(ReceiverAction{Kind: ActionEnqueue, ID: id, Size: size})
	}
}

// store takes stored ids off the queue and acks all of them, queued or not:
// an id the writer reports is durable, whichever copy made it so.
func (r *Receiver) store(ids []uint64) {
	if len(ids) == 0 {
		return
	}
	r.ids = append(r.ids[:0], ids...)
	slices.Sort(r.ids)
	for _, id := range r.ids {
		if size, ok := r.queue[id]; ok {
			delete(r.queue, id)
			r.queuedBytes -= size
		}
	}
	start := len(r.ranges)
	r.ranges = AppendRanges(r.ranges, r.ids)
	for _, rg := range r.ranges[start:] {
		r.stats.Acked += rg.Last - rg.First + 1
	}
	end := len(r.ranges)
	r.emit(ReceiverAction{Kind: ActionAck, Ranges: r.ranges[start:end:end]})
}

// grant emits a Grant if the credit invariant raised a limit.
func (r *Receiver) grant() {
	if !r.helloDone || r.closed {
		return
	}
	m, b := r.limits()
	if m > r.msgLimit || b > r.byteLimit {
		r.msgLimit, r.byteLimit = max(m, r.msgLimit), max(b, r.byteLimit)
		r.emit(ReceiverAction{Kind: ActionGrant, MsgLimit: r.msgLimit, ByteLimit: r.byteLimit})
	}
}

// limits evaluates the credit invariant. receivedBytes >= queuedBytes, as
// the queue is a subset of what was received, so nothing wraps.
func (r *Receiver) limits() (msgLimit, byteLimit uint64) {
	msgLimit = r.receivedMsgs + uint64(r.cfg.QueueMsgs-len(r.queue))
	byteLimit = r.receivedBytes - uint64(r.queuedBytes) + uint64(r.cfg.QueueBytes)
	return msgLimit, byteLimit
}

func (r *Receiver) fail(reason Reason) {
	r.closed = true
	r.emit(ReceiverAction{Kind: ActionFail, Reason: reason})
}

func (r *Receiver) emit(a ReceiverAction) { r.actions = append(r.actions, a) }

// Ready returns the actions produced since the last Advance, in order; the
// slice and the Ranges in it are valid until Advance. As with the Sender,
// Steps between Ready and Advance are fine.
func (r *Receiver) Ready() []ReceiverAction {
	r.readyN = len(r.actions)
	return r.actions[:r.readyN:r.readyN]
}

// HasReady reports whether Ready would return any action.
func (r *Receiver) HasReady() bool { return len(r.actions) > 0 }

// Advance discards the actions returned by the last Ready.
func (r *Receiver) Advance() {
	n := copy(r.actions, r.actions[r.readyN:])
	clear(r.actions[n:]) // drop references to ranges
	r.actions = r.actions[:n]
	r.readyN = 0
	if n == 0 {
		r.ranges = r.ranges[:0]
	}
}

// State returns the current state.
func (r *Receiver) State() ReceiverState {
	switch {
	case r.closed:
		return ReceiverClosed
	case !r.helloDone:
		return ReceiverHandshaking
	case len(r.queue) >= r.cfg.QueueMsgs || r.queuedBytes >= r.cfg.QueueBytes:
		return ReceiverBlocked
	}
	return ReceiverReceiving
}

// Queued returns what is enqueued and not yet stored.
func (r *Receiver) Queued() (msgs int, bytes int64) { return len(r.queue), r.queuedBytes }

// Limits returns the cumulative credits last advertised.
func (r *Receiver) Limits() (msgLimit, byteLimit uint64) { return r.msgLimit, r.byteLimit }

// Stats returns the counters.
func (r *Receiver) Stats() ReceiverStats { return r.stats }
