package kafkastore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kafkarec"
)

// seqWriter produces record batches the sink encoded itself, as an
// idempotent producer does: every batch carries the writer's producer id
// and the next sequence number of its partition, so that re-sending a
// batch whose answer was lost (a connection cut, a broker restarting, a
// leader moving) cannot store it twice — the broker remembers each
// producer's last five batches per partition and answers a repeat as
// stored. It is the writer half of the Kafka-native hop (docs/benchmarks.md,
// issue 27's seventh pass); rawProducer is its connection.
//
// Write waits while Kafka is away, re-sending in order what was not
// answered, as franz-go's producer does for the store today; it fails
// only on what a re-send cannot settle (the broker no longer knows the
// producer id, a sequence out of order, a batch refused for what it is)
// or when its context ends, and then takes a new producer id for the
// next Write: what became of that Write's batches is for the dedup
// index to find out (the tailer reads what landed).
//
// Write is for one goroutine (the sink's writer); Close may come from
// another, and waits for a Write to end (its context ended first).
type seqWriter struct {
	mu sync.Mutex // held by Write and Close

	cl       *kgo.Client // metadata and InitProducerID
	adm      *kadm.Client
	topic    string
	clientID string
	timeout  time.Duration // the broker's wait for the in-sync replicas, per request

	pid   int64 // -1 until InitProducerID answered
	epoch int16
	// core is the bookkeeping (sequence numbers, batches in flight, which
	// answers count): a pure state machine (seqcore.go) that the rounds
	// drive.
	core *seqCore

	leaders map[int32]int32        // partition → leader's broker id; nil when to be asked
	addrs   map[int32]string       // broker id → host:port
	conns   map[int32]*rawProducer // broker id → connection

	// resends counts the times a partition's unanswered batches were
	// sent again (a connection lost, a leader moved, Kafka away).
	resends int

	// partitionsSeen is the topic's partition count as the store's health
	// probe last listed it (0: not yet): when it differs from what the
	// writer knows, the next round asks for the leaders again, so that
	// partitions added to the topic are written to, as franz-go's
	// producer picked them up from its metadata refreshes.
	partitionsSeen atomic.Int32
}

// seqMaxInflight is the most batches of one partition sent and not yet
// answered: the broker deduplicates a re-send only among a producer's
// last five batches of the partition.
const seqMaxInflight = 5

// outBatch is one encoded record batch (header and records) for a
// partition. Write fills in its producer id, epoch, sequence and CRC,
// and Base.
type outBatch struct {
	Partition int32
	Data      []byte
	// Base is the offset Kafka gave the batch's first record, or -1 when
	// Kafka answered a re-send as a batch it had stored already.
	Base int64
}

// errSeqUnsettled wraps the errors after which the writer cannot know,
// by re-sending, which of a Write's batches are stored.
var errSeqUnsettled = errors.New("kafka: the batches' fate is unknown")

func newSeqWriter(cl *kgo.Client, topic, clientID string, timeout time.Duration) *seqWriter {
	return &seqWriter{cl: cl, adm: kadm.NewClient(cl), topic: topic, clientID: clientID, timeout: timeout,
		pid: -1, core: newSeqCore(), conns: map[int32]*rawProducer{}}
}

// Close closes the writer's connections.
func (w *seqWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropConns()
}

// ProducerID is the id the writer's batches carry (-1 before the first
// Write).
func (w *seqWriter) ProducerID() int64 { return w.pid }

// seqAnswer is one callback of rawProducer.Produce, queued for Write.
type seqAnswer struct {
	part     int32
	idx, gen int
	base     int64
	err      error
}

// Write produces batches (in order within each partition) and returns
// once Kafka has stored every one.
func (w *seqWriter) Write(ctx context.Context, batches []outBatch) error {
	r, err := w.Begin(ctx)
	if err != nil {
		return err
	}
	for _, b := range batches {
		r.Add(b)
	}
	err = r.Wait()
	copy(batches, r.batches)
	return err
}

// seqRound is one group of batches being written: Add sends each as soon
// as its partition has room in flight, so that encoding the next batches
// overlaps Kafka storing the first; Wait returns once all are stored.
// A round holds its writer from Begin to Wait. It is the driver of the
// writer's seqCore: it does what the core decides (send, forget a
// leader, wait) and feeds it what came of it.
type seqRound struct {
	w       *seqWriter
	c       *seqCore
	ctx     context.Context
	batches []outBatch

	// queue holds the answers the connections' readers delivered and the
	// round has not yet given the core; arrived wakes Wait.
	mu      sync.Mutex
	queue   []seqAnswer
	arrived chan struct{}

	err error // what ended the round early
}

// Begin starts a round; the caller must Wait for it.
func (w *seqWriter) Begin(ctx context.Context) (*seqRound, error) {
	w.mu.Lock()
	if err := w.ensurePID(ctx); err != nil {
		w.mu.Unlock()
		return nil, err
	}
	w.core.Begin()
	return &seqRound{w: w, c: w.core, ctx: ctx, arrived: make(chan struct{}, 1)}, nil
}

// Add stamps b with the producer id and its partition's next sequence,
// and sends it if its partition has room in flight. b.Data must stay as
// it is until Wait returns.
func (r *seqRound) Add(b outBatch) {
	if r.err != nil {
		return
	}
	if len(b.Data) < batchHeaderLen {
		r.err = fmt.Errorf("kafka: a batch of %d bytes", len(b.Data))
		return
	}
	// The header's record count, at offset 57, moves the sequence on.
	_, seq := r.c.Add(b.Partition, int32(binary.BigEndian.Uint32(b.Data[57:])))
	kafkarec.StampProducer(b.Data, r.w.pid, r.w.epoch, seq)
	r.batches = append(r.batches, b) // at the index Add returned
	r.sendReady()
	r.err = r.settle()
}

// Wait sends what is left, re-sending as needed, and returns once Kafka
// stored every batch of the round, or with what ended it early.
func (r *seqRound) Wait() error {
	w := r.w
	defer w.mu.Unlock()
	for r.err == nil && !r.c.Done() {
		r.sendReady()
		if attempt, wait := r.c.Backoff(); wait {
			if err := sleepCtx(r.ctx, retryBackoff(attempt)); err != nil {
				r.err = err
				break
			}
			r.c.BackedOff()
			continue
		}
		select {
		case <-r.arrived:
			r.err = r.settle()
		case <-r.ctx.Done():
			r.err = r.ctx.Err()
		}
	}
	if r.err != nil {
		return w.fail(r.err)
	}
	return nil
}

// answer queues a produce answer for the round's goroutine (it runs on a
// connection's reader, which must not wait).
func (r *seqRound) answer(a seqAnswer) {
	r.mu.Lock()
	r.queue = append(r.queue, a)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

// settle gives the core the answers that arrived and does what it says:
// record a stored batch's offset, forget a partition's leader (its
// batches go again), or end the round.
func (r *seqRound) settle() error {
	r.mu.Lock()
	got := r.queue
	r.queue = nil
	r.mu.Unlock()
	for _, a := range got {
		switch r.c.Answer(a.part, a.idx, a.gen, answerKind(a.err)) {
		case seqRecord:
			r.batches[a.idx].Base = a.base
		case seqRecordDuplicate:
			r.batches[a.idx].Base = -1
		case seqForget:
			r.w.forget(a.part)
			r.w.resends++
		case seqFailUnsettled:
			return fmt.Errorf("%w: partition %d answered out of order", errSeqUnsettled, a.part)
		case seqFailRefused:
			return fmt.Errorf("%w: partition %d: %w", errSeqUnsettled, a.part, a.err)
		}
	}
	return nil
}

// sendReady sends what the core names (every partition's batches that
// may be in flight), until it names none: all sent or in flight, or a
// send failed (no leader known, a connection that cannot be made or
// failed) and the core waits (Backoff) before trying again.
func (r *seqRound) sendReady() {
	w := r.w
	for {
		s, ok := r.c.NextSend()
		if !ok {
			return
		}
		conn, err := w.conn(r.ctx, s.Part)
		if err == nil {
			err = conn.Produce(s.Part, r.batches[s.Idx].Data, func(base int64, err error) {
				r.answer(seqAnswer{part: s.Part, idx: s.Idx, gen: s.Gen, base: base, err: err})
			})
		}
		if err != nil {
			if r.c.SendFailed(s.Part) == seqForget {
				w.forget(s.Part)
				w.resends++
			}
			continue
		}
		r.c.Sent(s.Part)
	}
}

// answerKind classifies a produce answer for the core.
func answerKind(err error) seqAnswerKind {
	switch {
	case err == nil:
		return seqStored
	case errors.Is(err, kerr.DuplicateSequenceNumber):
		return seqDuplicate
	case retriableProduce(err):
		return seqRetriable
	}
	return seqFatal
}

// conn returns the connection to partition part's leader, asking for the
// topic's leaders and dialing as needed.
func (w *seqWriter) conn(ctx context.Context, part int32) (*rawProducer, error) {
	if w.leaders == nil {
		if err := w.refreshLeaders(ctx); err != nil {
			return nil, err
		}
	}
	id, ok := w.leaders[part]
	if !ok || id < 0 {
		w.leaders = nil
		return nil, fmt.Errorf("kafka: partition %d of %q has no leader", part, w.topic)
	}
	if c := w.conns[id]; c != nil {
		return c, nil
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := dialRaw(dctx, w.addrs[id], w.topic, w.clientID, 4*seqMaxInflight, w.timeout)
	if err != nil {
		return nil, err
	}
	w.conns[id] = c
	return c, nil
}

func (w *seqWriter) refreshLeaders(ctx context.Context) error {
	md, err := w.adm.Metadata(ctx, w.topic)
	if err != nil {
		return err
	}
	td, ok := md.Topics[w.topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("kafka: topic %q: %v", w.topic, td.Err)
	}
	w.leaders, w.addrs = map[int32]int32{}, map[int32]string{}
	for p, pd := range td.Partitions {
		w.leaders[p] = pd.Leader
	}
	for _, b := range md.Brokers {
		w.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	return nil
}

// forget drops what the writer knew of partition part's leader and its
// connection (the next send asks and dials anew); other partitions on
// that connection find it failed and do the same.
func (w *seqWriter) forget(part int32) {
	if id, ok := w.leaders[part]; ok {
		if c := w.conns[id]; c != nil {
			c.Close()
			delete(w.conns, id)
		}
	}
	w.leaders = nil
}

// fail ends a Write that could not settle its batches: the next Write
// takes a new producer id (the old one's sequences are spent) and new
// connections.
func (w *seqWriter) fail(err error) error {
	w.pid = -1 // the next round's ensurePID restarts the core's sequences
	w.dropConns()
	return err
}

func (w *seqWriter) dropConns() {
	for id, c := range w.conns {
		c.Close()
		delete(w.conns, id)
	}
	w.leaders = nil
}

// ensurePID asks Kafka for a producer id unless the writer has one,
// trying until ctx ends while Kafka does not answer.
func (w *seqWriter) ensurePID(ctx context.Context) error {
	for tries := 1; w.pid < 0; tries++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		resp, err := req.RequestWith(ctx, w.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			w.pid, w.epoch = resp.ProducerID, resp.ProducerEpoch
			w.core.NewProducerID()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := sleepCtx(ctx, retryBackoff(tries)); err != nil {
			return err
		}
	}
	return nil
}

// retriableProduce reports whether a produce answer (or the failure of
// its connection) is settled by sending the batch again: the connection
// failed or timed out, or Kafka says to retry (a leader moving, not
// enough replicas in sync, a broker starting).
func retriableProduce(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
		errors.Is(err, kerr.InvalidProducerEpoch):
		return false
	case errors.As(err, &ne), errors.Is(err, net.ErrClosed), errors.Is(err, errRawClosed):
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	// The connection's own failures (EOF, a reset, an answer that is not
	// Kafka's) come wrapped by rawProducer: a new connection settles them.
	return true
}

// retryBackoff is the wait before the tries-th attempt: 100 ms doubling
// to 1 s, as the store's franz-go clients wait (clientOpts).
func retryBackoff(tries int) time.Duration {
	return min(100*time.Millisecond<<min(max(tries-1, 0), 4), time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
