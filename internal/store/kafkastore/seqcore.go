package kafkastore

import "fmt"

// seqCore is the bookkeeping of one round of seqWriter: which of the
// round's batches each partition has sent, which Kafka has answered, and
// what an answer means. It is a pure state machine — (state, event) →
// (effect, new state), no I/O, clock or goroutine — so that every cell of
// the table is tested on its own (seqcore_test.go); seqRound is its driver,
// which sends, dials, sleeps and classifies Kafka's errors.
//
// Events: Add (a batch joins the round), Sent (the driver handed a batch
// to its partition's connection), Lost (a send or a connection failed),
// Answer (Kafka answered a batch, or its connection failed under it).
// Effects: the next batch a partition may send (Ready), and what an
// answer does (answerEffect).
//
// The rules, which are Kafka's idempotent producer's:
//   - at most seqMaxInflight batches of a partition are sent and not yet
//     answered: the broker deduplicates a re-send only among a producer's
//     last five batches of the partition;
//   - a partition's batches are answered in the order they were sent; a
//     stored answer for another than its oldest unanswered batch means the
//     broker and the writer disagree, and the round fails unsettled;
//   - a retriable answer (a leader moving, a connection cut) re-sends from
//     the partition's oldest unanswered batch, and every answer to a send
//     from before (an older generation) is ignored: its batch is re-sent;
//   - anything else fails the round unsettled: what became of its batches
//     is for the dedup index to find out.
type seqCore struct {
	parts map[int32]*seqPart
	order []int32 // partitions in the order of their first batch
	total int     // batches added
	left  int     // batches not yet stored
}

// seqPart is a round's state for one partition: its batches (indices
// into the round) in order, how many Kafka answered (acked) and how many
// were sent, of which flight are unanswered; gen moves on each re-send so
// that answers from before it are ignored.
type seqPart struct {
	idx                 []int
	acked, sent, flight int
	gen                 int
}

// answerKind is what Kafka's answer to a batch says, as the driver
// classifies it (retriableProduce).
type answerKind uint8

const (
	answerStored    answerKind = iota // stored now
	answerDuplicate                   // stored before (a re-send): DUPLICATE_SEQUENCE_NUMBER
	answerRetriable                   // not stored; sending again settles it
	answerFatal                       // not settled by sending again
)

// answerEffect is what an answer does to the round.
type answerEffect uint8

const (
	effectIgnored   answerEffect = iota // an answer to a send from before a re-send
	effectCounted                       // the batch is stored; its partition may send more
	effectResend                        // the partition re-sends from its oldest unanswered batch (forget its connection)
	effectUnsettled                     // the round fails: the batches' fate is unknown
)

func newSeqCore() seqCore { return seqCore{parts: map[int32]*seqPart{}} }

// Add appends a batch of partition part to the round and returns its
// index in the round.
func (c *seqCore) Add(part int32) int {
	p := c.parts[part]
	if p == nil {
		p = &seqPart{}
		c.parts[part] = p
		c.order = append(c.order, part)
	}
	i := c.total
	p.idx = append(p.idx, i)
	c.total++
	c.left++
	return i
}

// Ready returns the batch partition part may send next, and the
// generation its answer must carry; ok is false while the partition has
// seqMaxInflight batches unanswered or nothing left to send.
func (c *seqCore) Ready(part int32) (idx, gen int, ok bool) {
	p := c.parts[part]
	if p == nil || p.flight >= seqMaxInflight || p.sent >= len(p.idx) {
		return 0, 0, false
	}
	return p.idx[p.sent], p.gen, true
}

// Sent records that the batch Ready returned went to the connection.
func (c *seqCore) Sent(part int32) {
	p := c.parts[part]
	p.sent++
	p.flight++
}

// Lost records that partition part's connection failed (a send could not
// be made): its unanswered batches are sent again, from the oldest, and
// answers to the earlier sends are ignored.
func (c *seqCore) Lost(part int32) {
	p := c.parts[part]
	p.gen++
	p.sent, p.flight = p.acked, 0
}

// Answer takes Kafka's answer to batch idx of partition part, sent in
// generation gen.
func (c *seqCore) Answer(part int32, idx, gen int, kind answerKind) (answerEffect, error) {
	p := c.parts[part]
	if p == nil {
		return effectUnsettled, fmt.Errorf("%w: an answer for partition %d, which the round has no batch for", errSeqUnsettled, part)
	}
	if gen != p.gen {
		return effectIgnored, nil // sent before a re-send: its answer is the re-send's
	}
	p.flight--
	switch kind {
	case answerStored, answerDuplicate:
		if p.acked >= len(p.idx) || idx != p.idx[p.acked] {
			return effectUnsettled, fmt.Errorf("%w: partition %d answered out of order", errSeqUnsettled, part)
		}
		p.acked++
		c.left--
		return effectCounted, nil
	case answerRetriable:
		c.Lost(part)
		return effectResend, nil
	default:
		return effectUnsettled, nil
	}
}

// Left is how many of the round's batches are not yet stored.
func (c *seqCore) Left() int { return c.left }

// Partitions lists the round's partitions in the order of their first
// batch (the driver sends in this order: deterministic, unlike a map's).
func (c *seqCore) Partitions() []int32 { return c.order }
