package kafkastore

import "fmt"

// seqCore is seqWriter's bookkeeping as a pure state machine: the
// sequence number each batch carries, which batches of a partition may be
// in flight, which answers count, when a partition sends again from its
// first unanswered batch, and when a round can no longer be settled. It
// does no I/O, reads no clock and starts no goroutine, so that every
// state × event cell can be tested on its own (seqcore_test.go: a table
// of them, and a seeded simulation against a model of the broker). The
// driver is seqRound (seqwriter.go): it finds leaders, dials, sends,
// sleeps and turns what happened into the events below.
//
// Events, one method each:
//
//	NewProducerID  the driver holds a new producer id: sequences restart at 0
//	Begin          a round (one Write, one Append) starts
//	Add            a batch of n records for a partition joins the round
//	Sent           the batch NextSend named is written on its connection
//	SendFailed     it could not be (no leader, no connection, a failed one)
//	Answer         Kafka answered a batch, or its connection failed
//	BackedOff      the wait Backoff asked for is over
//
// Outputs: Add returns the batch's index and the sequence to stamp;
// NextSend names the next batch to send; Answer and SendFailed return
// what the driver must do (seqAction); Backoff says whether to wait and
// for which attempt; Done and Failed say how the round stands.
//
// A seqCore is for one goroutine at a time (the round's holder of
// seqWriter.mu).
type seqCore struct {
	// next is each partition's next sequence number for the current
	// producer id: the broker stores a batch only if it carries exactly
	// this, and takes one of its last five again as a duplicate.
	next map[int32]int32
	// parts holds every partition written so far, reused from round to
	// round so that a round in steady state allocates nothing; order is
	// this round's partitions in the order of their first batch, the
	// order NextSend goes through them.
	parts map[int32]*seqPart
	order []*seqPart
	round int // counts Begin; a part of another round has no batches in this one

	added int // batches in the round: the next batch's index
	left  int // batches not yet answered as stored

	// cursor is where NextSend's sweep over order stands: a sweep sends
	// every partition's ready batches in turn, and one partition's failed
	// send does not stop the others' (sweepFailed); the back-off comes at
	// the sweep's end.
	cursor      int
	sweepFailed bool
	backoff     bool // waiting (Backoff) before sending again
	tries       int  // back-offs waited since an answer last stored a batch
	failed      bool // an answer no re-send can settle: the round is over
}

// seqPart is a round's state for one partition: its batches in order (as
// indexes in the round), and how many are answered as stored (acked) and
// sent in the current generation. gen moves on each re-send, so that
// answers to what was sent before it are ignored: the re-send's answers
// are the ones that count.
//
// Invariant: acked ≤ sent ≤ len(idx), and sent − acked, the batches in
// flight, is at most seqMaxInflight.
type seqPart struct {
	part  int32
	round int
	idx   []int
	acked int
	sent  int
	gen   int // never reset: an answer is ignored unless its gen is current
}

// seqSend is a batch to send: its partition, its index in the round and
// the generation its answer must carry to count.
type seqSend struct {
	Part int32
	Idx  int
	Gen  int
}

// seqAnswerKind is a produce answer as the core needs it (the driver
// classifies the error: answerKind).
type seqAnswerKind uint8

const (
	seqStored    seqAnswerKind = iota // stored now, at the offset answered
	seqDuplicate                      // DuplicateSequenceNumber: stored before (a re-send of a stored batch)
	seqRetriable                      // not known to be stored; a re-send settles it
	seqFatal                          // refused for what it is, or the producer's sequences are broken
)

// seqAction is what an event asks of the driver.
type seqAction uint8

const (
	seqNothing         seqAction = iota // an answer from before a re-send, or after the round failed
	seqRecord                           // the batch is stored at the answer's offset
	seqRecordDuplicate                  // the batch was stored before; its offset is unknown (-1)
	// seqForget: the partition's leader and connection are no longer to
	// be trusted: forget them (the next send asks and dials anew); its
	// unanswered batches go again, from the first.
	seqForget
	// seqFailUnsettled: an answer for a batch that is not the
	// partition's oldest unanswered one (or for none at all): the broker
	// and the writer disagree on what is stored, which no re-send
	// settles. The round fails; the producer id is spent.
	seqFailUnsettled
	// seqFailRefused: a fatal answer. The round fails; the producer id
	// is spent.
	seqFailRefused
)

var seqActionNames = [...]string{
	seqNothing: "nothing", seqRecord: "record", seqRecordDuplicate: "record-duplicate",
	seqForget: "forget", seqFailUnsettled: "fail-unsettled", seqFailRefused: "fail-refused",
}

func (a seqAction) String() string {
	if int(a) < len(seqActionNames) {
		return seqActionNames[a]
	}
	return fmt.Sprintf("seqAction(%d)", uint8(a))
}

func newSeqCore() *seqCore {
	return &seqCore{next: map[int32]int32{}, parts: map[int32]*seqPart{}}
}

// NewProducerID: the driver took a new producer id (the first, or after
// a failed round spent the last): every partition's sequence restarts at 0.
func (c *seqCore) NewProducerID() {
	clear(c.next)
}

// Begin starts a round: no batches, no back-off, not failed. Sequences
// go on from the last round's (same producer id).
func (c *seqCore) Begin() {
	c.round++
	c.order = c.order[:0]
	c.added, c.left = 0, 0
	c.cursor, c.sweepFailed = 0, false
	c.backoff, c.tries, c.failed = false, 0, false
}

// Add puts a batch of n records for partition part in the round, after
// the partition's others, and returns its index in the round (0, 1, …
// across partitions) and the sequence number it must carry.
func (c *seqCore) Add(part, n int32) (idx int, seq int32) {
	p := c.parts[part]
	if p == nil {
		p = &seqPart{part: part}
		c.parts[part] = p
	}
	if p.round != c.round {
		if p.round != 0 {
			// A generation of its own, so that an answer from an earlier
			// round, were one to reach this one, is stale.
			p.gen++
		}
		p.round = c.round
		p.idx, p.acked, p.sent = p.idx[:0], 0, 0
		c.order = append(c.order, p)
	}
	idx = c.added
	c.added++
	c.left++
	p.idx = append(p.idx, idx)
	seq = c.next[part]
	c.next[part] = nextSequence(seq, n)
	return idx, seq
}

// NextSend names the batch to send now, or reports false when there is
// none: every partition has seqMaxInflight batches in flight or nothing
// unsent, or the round waits (Backoff) or failed. The driver answers
// each batch named with Sent or SendFailed before asking again, and asks
// until false (the end of a sweep: a failed send in it starts a back-off).
func (c *seqCore) NextSend() (seqSend, bool) {
	if c.backoff || c.failed {
		return seqSend{}, false
	}
	for ; c.cursor < len(c.order); c.cursor++ {
		p := c.order[c.cursor]
		if p.sent-p.acked < seqMaxInflight && p.sent < len(p.idx) {
			return seqSend{Part: p.part, Idx: p.idx[p.sent], Gen: p.gen}, true
		}
	}
	c.cursor = 0
	if c.sweepFailed {
		c.sweepFailed, c.backoff = false, true
	}
	return seqSend{}, false
}

// Sent: the batch NextSend named for partition part is written; its
// answer will come.
func (c *seqCore) Sent(part int32) {
	c.sending(part).sent++
}

// SendFailed: the batch NextSend named for partition part could not be
// sent. The partition's unanswered batches go again, from the first, once
// the sweep is over and its back-off waited; the answers to those in
// flight are ignored. The driver must forget the partition's leader and
// connection (seqForget).
func (c *seqCore) SendFailed(part int32) seqAction {
	p := c.sending(part)
	c.resend(p)
	c.cursor++ // on to the other partitions
	c.sweepFailed = true
	return seqForget
}

// sending returns the partition of the batch NextSend named: part, or a
// driver's bug.
func (c *seqCore) sending(part int32) *seqPart {
	if c.cursor >= len(c.order) || c.order[c.cursor].part != part {
		panic(fmt.Sprintf("kafkastore: seqCore: a send for partition %d that NextSend did not name", part))
	}
	return c.order[c.cursor]
}

// resend makes p send again from its first unanswered batch in a new
// generation.
func (c *seqCore) resend(p *seqPart) {
	p.gen++
	p.sent = p.acked
}

// Answer takes Kafka's answer for batch idx of partition part, sent in
// generation gen, and returns what the driver must do.
func (c *seqCore) Answer(part int32, idx, gen int, kind seqAnswerKind) seqAction {
	p := c.parts[part]
	if c.failed || p == nil || p.round != c.round {
		return seqNothing
	}
	if gen != p.gen && !mutationSeqIgnoreGen {
		return seqNothing // sent before a re-send: the re-send's answer counts
	}
	switch kind {
	case seqStored, seqDuplicate:
		// Kafka stores a partition's batches in sequence order, so the
		// answers of one generation come in the order they were sent; an
		// answer for any other batch than the oldest unanswered means the
		// broker and the writer disagree on what is stored.
		if (p.acked == p.sent || idx != p.idx[p.acked]) && !mutationSeqAnyOrder {
			c.failed = true
			return seqFailUnsettled
		}
		p.acked++
		c.left--
		c.tries = 0
		if kind == seqDuplicate {
			return seqRecordDuplicate
		}
		return seqRecord
	case seqRetriable:
		c.resend(p)
		return seqForget
	default:
		c.failed = true
		return seqFailRefused
	}
}

// Backoff reports whether the driver must wait before sending again, and
// which back-off in a row (from 1; an answer that stores a batch starts
// the count again) this is, for the length of the wait (retryBackoff).
func (c *seqCore) Backoff() (attempt int, wait bool) {
	return c.tries + 1, c.backoff
}

// BackedOff: the wait is over; NextSend sends again.
func (c *seqCore) BackedOff() {
	c.backoff = false
	c.tries++
}

// Done reports whether every batch added is answered as stored.
func (c *seqCore) Done() bool { return c.left == 0 && !c.failed }

// Failed reports whether an answer ended the round unsettled.
func (c *seqCore) Failed() bool { return c.failed }

// nextSequence is the sequence after a batch of n records starting at s:
// Kafka's sequences wrap to 0 after the largest int32.
func nextSequence(s, n int32) int32 {
	return int32((int64(s) + int64(n)) % (1 << 31))
}
