package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/wire"
)

// Record is one record of the sink's store.
type Record struct {
	// Offset is the store offset of the message holding the record (with
	// a Kafka-backed sink, partition<<48 | offset); Index is the record's
	// position in it. Together they name the record for ResumeAfter.
	Offset uint64
	Index  int
	// Agent and MessageID are the message's provenance: the producer's
	// agent id and its message id, unique per agent.
	Agent     string
	MessageID uint64
	Value     []byte
}

// Batch is the rest of one stored message: records First, First+1, … of
// the message at Offset.
type Batch struct {
	Offset    uint64
	Agent     string
	MessageID uint64
	First     int
	Records   [][]byte
}

// Reconnect describes a following Consumer's reconnection (OnReconnect).
type Reconnect struct {
	Addr string        // the sink whose stream was lost
	Err  error         // why
	Wait time.Duration // the back-off before the next attempt
	// From is the offset the next stream starts at, unless FromCommitted
	// (a multi-partition Kafka read resumes at its group's commits).
	From          uint64
	FromCommitted bool
}

// ConsumerStats is a snapshot of a Consumer's counters.
type ConsumerStats struct {
	Messages, Records uint64 // returned by Next and NextBatch
	// Position is the next offset to return: after the last message
	// returned whole, or the end of the log once caught up.
	Position   uint64
	Reconnects uint64
}

// ErrNoGroup: Commit without a Group.
var ErrNoGroup = errors.New("client: commit needs a Group")

// kafkaOffsetBits: a Kafka-backed sink packs partition<<48 | offset.
const kafkaOffsetBits = wire.KafkaOffsetBits

// maxRecvBytes is the largest Read response: the sink's largest message
// (internal/sink.MaxMessageBytesLimit, 256 MiB) plus framing.
const maxRecvBytes = 256<<20 + 1<<20

// Back-off between a following consumer's reconnection attempts, and how
// long Close waits for the sink to apply the last commits.
const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = ReconnectMax
	closeGrace   = 5 * time.Second
)

// ReconnectMax is the longest wait between a following Consumer's
// reconnection attempts.
const ReconnectMax = defaults.ReconnectMax

// Consumer reads a sink's store in order. Next, NextBatch, Records,
// Commit, CommitAsync, Buffered and Close must not be called
// concurrently; Stats may be called from any goroutine.
type Consumer struct {
	cfg     cfg
	addrs   []string
	closers []io.Closer
	dialers []protocol.Dialer
	attempt int
	backoff time.Duration
	// downSince is when the first of the failures since the last stream
	// opened happened (zero: none).
	downSince time.Time

	st *readStream
	// stashed is the current stream's end, taken from it by Buffered.
	stashed *recv
	queue   []item
	cur     *protocol.Stored
	idx     int
	skip    *Record // ResumeAfter: records of its message up to it are skipped

	// recvNext is the offset after the last message or end of log
	// received (positioned: one was); the next stream starts there.
	recvNext                uint64
	positioned, partitioned bool
	// done is, per Kafka partition (0 for the embedded store), the offset
	// after the last message returned whole: what a commit stores.
	// committed is what the sink has confirmed, sent what the current
	// stream carried.
	done, committed, sent map[uint64]uint64

	// atEnd: Next returned io.EOF and nothing was received since.
	atEnd  bool
	closed bool

	mu    sync.Mutex // guards stats and ready
	stats ConsumerStats
	ready int // messages received and not yet returned whole (Buffered)
}

type item struct {
	msg *protocol.Stored // nil: an end of log at next
	end uint64
}

type readStream struct {
	pc          protocol.Conn
	cancel      context.CancelFunc
	resps       chan recv
	addr        string
	outstanding uint32
	closedSend  bool
	delivered   bool
}

type recv struct {
	frame protocol.Frame
	err   error
}

// NewConsumer returns a Consumer of the sink at SinkAddrs (required).
// It connects on the first Next.
func NewConsumer(opts ...ConsumerOpt) (*Consumer, error) {
	c := cfg{credits: 256}
	for _, o := range opts {
		o.apply(&c)
	}
	if len(c.sinks) == 0 {
		return nil, errors.New("client: SinkAddrs is required")
	}
	if c.credits < 2 || c.credits > 1<<20 {
		return nil, errors.New("client: Credits must be between 2 and 1048576")
	}
	if len(c.group) > 255 {
		return nil, errors.New("client: Group name over 255 bytes")
	}
	if err := c.checkToken(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	o := c.transport()
	o.MaxRecvBytes = maxRecvBytes
	o.ReconnectMax = reconnectMax
	if c.follow {
		// A following consumer may wait a long time for records; pings
		// tell a quiet sink from a frozen one, which then counts as lost.
		o.KeepaliveTime, o.KeepaliveTimeout = 10*time.Second, 10*time.Second
	}
	cs := &Consumer{cfg: c, backoff: reconnectMin, skip: c.resumeAfter,
		done: map[uint64]uint64{}, committed: map[uint64]uint64{}, sent: map[uint64]uint64{}}
	for _, addr := range c.sinks {
		d, cc, err := grpctransport.Connect(addr, o)
		if err != nil {
			cs.closeConns()
			return nil, fmt.Errorf("client: %w", err)
		}
		cs.addrs = append(cs.addrs, addr)
		cs.closers = append(cs.closers, cc)
		cs.dialers = append(cs.dialers, d)
	}
	return cs, nil
}

// Next returns the next record. Without Follow it returns io.EOF once it
// has caught up with the store (a later call returns what arrived since,
// or io.EOF again). With Follow it waits for new records, and when the sink goes
// away (a restart, a crash, a broken network) reconnects and resumes
// after the last record received, so nothing is returned twice or
// skipped. Errors that need a person (a bad offset, permissions) are
// returned; so is ctx's error, after which Next may be called again.
func (c *Consumer) Next(ctx context.Context) (Record, error) {
	if err := c.advance(ctx); err != nil {
		return Record{}, err
	}
	m := c.cur
	r := Record{Offset: m.Offset, Index: c.idx, Agent: m.AgentID, MessageID: m.MessageID, Value: m.Records[c.idx]}
	c.idx++
	c.returned(1)
	return r, nil
}

// NextBatch returns the rest of the next stored message at once: for
// callers that write records out in bulk and commit per message. It
// waits and ends like Next.
func (c *Consumer) NextBatch(ctx context.Context) (Batch, error) {
	if err := c.advance(ctx); err != nil {
		return Batch{}, err
	}
	m := c.cur
	b := Batch{Offset: m.Offset, Agent: m.AgentID, MessageID: m.MessageID, First: c.idx, Records: m.Records[c.idx:]}
	n := len(b.Records)
	c.idx += n
	c.returned(n)
	return b, nil
}

// Records iterates over Next's results until it returns an error, which
// is yielded last (io.EOF, the end of a read without Follow, is not).
func (c *Consumer) Records(ctx context.Context) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for {
			r, err := c.Next(ctx)
			if err == io.EOF {
				return
			}
			if !yield(r, err) || err != nil {
				return
			}
		}
	}
}

// returned accounts for n records handed out of c.cur, and finishes the
// message when none is left.
func (c *Consumer) returned(n int) {
	m := c.cur
	whole := c.idx >= len(m.Records)
	if whole {
		c.done[m.Offset>>kafkaOffsetBits] = m.Offset + 1
		c.cur = nil
	}
	c.mu.Lock()
	c.stats.Records += uint64(n)
	if whole {
		c.stats.Messages++
		c.stats.Position = m.Offset + 1
		c.ready--
	}
	c.mu.Unlock()
}

// advance makes c.cur a message with records left to return.
func (c *Consumer) advance(ctx context.Context) error {
	for {
		if c.closed {
			return ErrClosed
		}
		if c.cur != nil && c.idx < len(c.cur.Records) {
			return nil
		}
		if c.cur != nil {
			c.returned(0) // an empty message (or all skipped)
			continue
		}
		if len(c.queue) == 0 {
			if err := c.fill(ctx); err != nil {
				return err
			}
		}
		it := c.queue[0]
		c.queue[0] = item{}
		c.queue = c.queue[1:]
		if it.msg == nil {
			c.mu.Lock()
			if c.ready == 0 {
				c.stats.Position = it.end
			}
			c.mu.Unlock()
			if !c.cfg.follow && len(c.queue) == 0 {
				c.atEnd = true
				return io.EOF
			}
			continue
		}
		c.cur, c.idx = it.msg, 0
		if s := c.skip; s != nil && it.msg.Offset >= s.Offset {
			if it.msg.Offset == s.Offset {
				c.idx = min(s.Index+1, len(it.msg.Records))
			}
			c.skip = nil
		}
	}
}

// Buffered is how many messages the Consumer has received and not yet
// returned whole, which Next returns without waiting for the network; 0
// means the next call may block, a moment to flush what the caller
// wrote. Call it from the goroutine that calls Next.
func (c *Consumer) Buffered() int {
	// Take what has arrived, so that an end of log waiting in the
	// channel does not count as something to return.
drain:
	for c.st != nil && c.stashed == nil {
		select {
		case r := <-c.st.resps:
			if r.err != nil {
				c.stashed = &r
			} else {
				c.take(r.frame)
			}
		default:
			break drain
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// fill waits until the queue holds something, (re)connecting as needed.
func (c *Consumer) fill(ctx context.Context) error {
	for len(c.queue) == 0 {
		if c.st == nil {
			if err := c.connect(ctx); err != nil {
				if rerr := c.retry(ctx, err, ""); rerr != nil {
					return rerr
				}
				continue
			}
		}
		var r recv
		if c.stashed != nil {
			r, c.stashed = *c.stashed, nil
		} else if c.atEnd && !c.cfg.follow {
			// The sink says where the log ends only after sending
			// something: what has not arrived yet is not waited for.
			select {
			case r = <-c.st.resps:
			default:
				return io.EOF
			}
		} else {
			select {
			case r = <-c.st.resps:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if r.err != nil {
			addr := c.st.addr
			c.endStream(false)
			if r.err == io.EOF {
				r.err = protocol.Errorf(protocol.StatusUnavailable, "the sink ended the stream")
			}
			if rerr := c.retry(ctx, r.err, addr); rerr != nil {
				return rerr
			}
			continue
		}
		if err := c.take(r.frame); err != nil {
			return err
		}
	}
	return nil
}

// take queues one frame and returns the credit it used. A Stored frame
// is kept past the next Recv: the transports give each its own memory
// (gRPC unmarshals into a new message, memconn copies).
func (c *Consumer) take(f protocol.Frame) error {
	st := c.st
	switch f := f.(type) {
	case *protocol.Stored:
		m := f
		c.queue = append(c.queue, item{msg: m})
		c.atEnd = false
		c.recvNext, c.positioned = m.Offset+1, true
		c.partitioned = c.partitioned || m.Offset>>kafkaOffsetBits != 0
		st.delivered = true
		c.mu.Lock()
		c.ready++
		c.mu.Unlock()
		if st.closedSend {
			return nil
		}
		window := c.cfg.credits
		if st.outstanding--; st.outstanding <= window/2 {
			c.send(&protocol.ReadMore{N: window - st.outstanding})
			st.outstanding = window
		}
	case *protocol.EndOfLog:
		c.queue = append(c.queue, item{end: f.Next})
		c.recvNext, c.positioned = f.Next, true
		st.delivered = true
	}
	return nil
}

// send puts a frame on the current stream. A failed send shows up as
// the stream's receive error, which decides what happens next.
func (c *Consumer) send(f protocol.Frame) {
	_ = c.st.pc.Send(f)
}

// retry decides what a lost stream (or failed connection) means: for a
// following consumer and a transient error, wait a back-off and let fill
// reconnect; otherwise the error is the caller's.
func (c *Consumer) retry(ctx context.Context, err error, addr string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if addr == "" {
		addr = c.addrs[c.attempt%len(c.addrs)]
	}
	if !c.cfg.follow || !protocol.IsRetryable(err) {
		return fmt.Errorf("client: read from sink at %s: %w", addr, err)
	}
	// Every failure backs off, a failed dial as much as a lost stream
	// (before issue 24 only a stream's end did: with the sink down the
	// wait stayed at 80–120 ms); a stream that delivered starts afresh.
	wait := time.Duration(float64(c.backoff) * (0.8 + 0.4*mrand.Float64()))
	c.backoff = min(2*c.backoff, reconnectMax)
	if c.downSince.IsZero() {
		c.downSince = time.Now()
	}
	ev := Reconnect{Addr: addr, Err: err, Wait: wait}
	ev.From, ev.FromCommitted = c.startAt()
	if c.cfg.onReconnect != nil {
		c.cfg.onReconnect(ev)
	} else {
		c.cfg.log().Warn("client: sink stream lost; reconnecting", "sink", addr, "err", err, "wait", wait, "from", ev.From, "from_committed", ev.FromCommitted)
	}
	c.mu.Lock()
	c.stats.Reconnects++
	c.mu.Unlock()
	t := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.C:
	}
	c.attempt++
	return nil
}

// startAt is where the next stream starts: after what was received
// (not the group's committed offset: a commit may not have reached a sink
// that died), the group's commits for a multi-partition Kafka read (one
// offset cannot say where each partition stopped), or where the options
// say.
func (c *Consumer) startAt() (from uint64, fromCommitted bool) {
	switch {
	case c.positioned && c.partitioned:
		return 0, true
	case c.positioned:
		return c.recvNext, false
	}
	return c.cfg.from, c.cfg.group != "" && !c.cfg.fromSet
}

// connect opens a Read stream where the consumer stands.
func (c *Consumer) connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	from, fromCommitted := c.startAt()
	if c.positioned && c.partitioned {
		if c.cfg.group == "" {
			return protocol.Errorf(protocol.StatusInvalid, "cannot resume a multi-partition Kafka read without a Group")
		}
		// What was received and not returned comes again from the
		// group's commits.
		c.queue, c.cur = nil, nil
		c.mu.Lock()
		c.ready = 0
		c.mu.Unlock()
	}
	i := c.attempt % len(c.dialers)
	if !c.downSince.IsZero() {
		// Our back-off decides when to try: not gRPC's own, under it.
		if r, ok := c.closers[i].(interface{ ResetConnectBackoff() }); ok {
			r.ResetConnectBackoff()
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	pc, err := c.dialers[i].Read(sctx)
	if err != nil {
		cancel()
		return err
	}
	if !c.downSince.IsZero() {
		if c.cfg.onConnect != nil {
			c.cfg.onConnect(c.addrs[i], time.Since(c.downSince))
		} else {
			c.cfg.log().Info("client: sink reachable again", "sink", c.addrs[i], "after", time.Since(c.downSince))
		}
		c.downSince = time.Time{}
	}
	// Streams always follow: without Follow the consumer stops at the end
	// of log itself. A following stream ends cleanly once the consumer
	// closes its side, every commit sent on it applied, wherever it
	// stands; a non-following one would refuse to end before the end of
	// the log.
	st := &readStream{pc: pc, cancel: cancel, resps: make(chan recv, 64), addr: c.addrs[i], outstanding: c.cfg.credits}
	c.st = st
	c.send(&protocol.ReadStart{From: from, FromCommitted: fromCommitted, Follow: true, Group: c.cfg.group})
	c.send(&protocol.ReadMore{N: c.cfg.credits})
	if c.cfg.group != "" && !fromCommitted {
		c.sendCommits()
	}
	go func() {
		for {
			f, err := pc.Recv()
			select {
			case st.resps <- recv{f, err}:
			case <-sctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}

// endStream drops the current stream; clean means it ended after the
// consumer closed its side, so every commit it carried is applied.
func (c *Consumer) endStream(clean bool) {
	st := c.st
	if st == nil {
		return
	}
	st.cancel()
	st.pc.Close(nil)
	c.st, c.stashed = nil, nil
	if st.delivered {
		c.backoff = reconnectMin // the stream delivered: start the back-off afresh
	}
	if clean {
		for p, off := range c.sent {
			c.committed[p] = off
		}
	}
	// A commit on a stream that broke may be lost: send it again.
	clear(c.sent)
}

// sendCommits sends the position of every partition that moved since the
// last commit confirmed or sent on this stream.
func (c *Consumer) sendCommits() {
	for p, off := range c.done {
		if off == c.committed[p] || off == c.sent[p] {
			continue
		}
		c.send(&protocol.Commit{Offset: off})
		c.sent[p] = off
	}
}

// CommitAsync sends the group the position after the last message
// returned whole, on the current stream, without waiting: the sink
// applies commits in order, and Commit or Close confirm them. A commit on
// a stream that then breaks is sent again on the next one. Records of a
// message returned in part are read again after a restart: reads with a
// group are at least once.
func (c *Consumer) CommitAsync() error {
	switch {
	case c.closed:
		return ErrClosed
	case c.cfg.group == "":
		return ErrNoGroup
	case c.st != nil && !c.st.closedSend:
		c.sendCommits()
	}
	return nil
}

// Commit stores the group's position (see CommitAsync) and returns once
// the sink has applied it durably. It ends the current stream to learn
// that (the protocol acknowledges commits by ending a stream cleanly);
// the next Next opens another one where this one stopped.
func (c *Consumer) Commit(ctx context.Context) error {
	switch {
	case c.closed:
		return ErrClosed
	case c.cfg.group == "":
		return ErrNoGroup
	}
	return c.confirm(ctx)
}

// confirm sends outstanding commits, closes the stream's side and waits
// for the sink to end it, keeping whatever it still sends.
func (c *Consumer) confirm(ctx context.Context) error {
	pending := false
	for p, off := range c.done {
		pending = pending || c.committed[p] != off
	}
	if c.stashed != nil {
		c.endStream(false) // it is over already, and what it carried unconfirmed
	}
	if !pending && c.st == nil {
		return nil
	}
	if c.st == nil {
		if err := c.connect(ctx); err != nil {
			return fmt.Errorf("client: commit: %w", err)
		}
	}
	st := c.st
	if !st.closedSend {
		c.sendCommits()
		st.closedSend = true
		st.pc.CloseSend()
	}
	for {
		var r recv
		select {
		case r = <-st.resps:
		case <-ctx.Done():
			c.endStream(false)
			return fmt.Errorf("client: commit not confirmed: %w", ctx.Err())
		}
		if r.err == nil {
			c.take(r.frame)
			continue
		}
		if r.err == io.EOF {
			c.endStream(true)
			return nil
		}
		c.endStream(false)
		return fmt.Errorf("client: commit not confirmed by sink at %s: %w", st.addr, r.err)
	}
}

// Stats returns the Consumer's counters.
func (c *Consumer) Stats() ConsumerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close ends the Consumer. With a Group it first has the sink apply the
// position (as Commit, waiting at most 5 seconds) and returns an error
// if that is not confirmed.
func (c *Consumer) Close() error {
	if c.closed {
		return nil
	}
	var err error
	if c.cfg.group != "" {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		err = c.confirm(ctx)
		cancel()
	}
	c.endStream(false)
	c.closed = true
	c.closeConns()
	return err
}

func (c *Consumer) closeConns() {
	for _, cc := range c.closers {
		cc.Close()
	}
}
