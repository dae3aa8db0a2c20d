package sink

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/kafkastore"
	"github.com/sluicehq/sluice/internal/wire"
)

// kafkaOffsetBits: see wire.KafkaOffsetBits.
const kafkaOffsetBits = wire.KafkaOffsetBits

func packOffset(p int32, o int64) uint64 { return uint64(p)<<kafkaOffsetBits | uint64(o) }

func unpackOffset(v uint64) (int32, int64) {
	return int32(v >> kafkaOffsetBits), int64(v & (1<<kafkaOffsetBits - 1))
}

// maxReadRun bounds the records one StoredMessage gathers from records
// that carry no sluice headers.
const maxReadRun = 4096

// readKafka serves a Read session from the Kafka topic of k (see
// docs/architecture.md, "Kafka store"): the consumer's session is the
// sink's, the records the store's.
func (s *Sink) readKafka(k *kafkastore.Store, conn protocol.Conn, start *protocol.ReadStart) error {
	ctx := conn.Context()
	group := start.Group
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	starts, ends, err := k.ListOffsets(lctx)
	cancel()
	if err != nil {
		return protocol.Errorf(protocol.StatusUnavailable, "the Kafka store cannot be read now: %v", err)
	}
	from := make(map[int32]int64, len(ends))
	for p := range ends {
		from[p] = starts[p]
	}
	committed := false
	if start.FromCommitted {
		var offs kadm.OffsetResponses
		err := kafkastore.Retry(ctx, func(ctx context.Context) (err error) {
			offs, err = k.Admin().FetchOffsetsForTopics(ctx, group, k.Topic())
			return err
		})
		if err != nil {
			s.log.Error("sink: cannot read group offsets from Kafka", "group", group, "err", err)
			return protocol.Errorf(protocol.StatusUnavailable, "cannot read the offsets of group %q from Kafka: %v", group, err)
		}
		for p, o := range offs[k.Topic()] {
			if _, ok := from[p]; ok && o.At >= 0 {
				from[p], committed = o.At, true
			}
		}
	}
	if fo := start.From; !committed && fo != 0 {
		p, o := unpackOffset(fo)
		end, ok := ends[p]
		switch {
		case len(ends) > 1:
			return protocol.Errorf(protocol.StatusInvalid,
				"from_offset %d (partition %d, offset %d): the Kafka topic %q has %d partitions and one offset cannot say where to start in each; start at 0 (every partition from its start) or use a group",
				fo, p, o, k.Topic(), len(ends))
		case !ok:
			return protocol.Errorf(protocol.StatusOutOfRange, "from_offset %d is partition %d (offset %d), which the Kafka topic %q does not have", fo, p, o, k.Topic())
		case o < starts[p] || o > end:
			return protocol.Errorf(protocol.StatusOutOfRange, "offset %d outside partition %d's [%d, %d] in the Kafka topic %q", o, p, starts[p], end, k.Topic())
		}
		from[p] = o
	}
	offsets := make(map[int32]kgo.Offset, len(from))
	for p, o := range from {
		offsets[p] = kgo.NewOffset().At(o)
	}
	cl, err := kgo.NewClient(append(k.ClientOpts("reader"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.Topic(): offsets}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(kafkastore.FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(kafkastore.FetchMaxPartitionBytes),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return protocol.Errorf(protocol.StatusInternal, "Kafka client: %v", err)
	}
	defer cl.Close()

	r := newReadStream(s, conn, group, start.Follow)
	c := &kafkaCommitter{k: k, log: s.log, group: group, parts: ends, kick: make(chan struct{}, 1)}
	r.commitFn, r.flushFn = c.add, c.flush
	kr := &kafkaReader{k: k, r: r, cl: cl, starts: starts, ends: ends, pos: from,
		hwm: make(map[int32]int64, len(ends)), seen: store.NewDedup()}
	for p, e := range ends {
		kr.hwm[p] = e
	}
	s.m.streams.WithLabelValues("read").Inc()
	defer s.m.streams.WithLabelValues("read").Dec()
	go r.recvLoop()
	go c.run(r)
	err = kr.run(ctx)
	close(r.done)
	return err
}

// kafkaReader is the loop of one Read stream on the Kafka store.
type kafkaReader struct {
	k  *kafkastore.Store
	r  *readStream
	cl *kgo.Client

	starts, ends map[int32]int64 // as listed when the read began
	pos          map[int32]int64 // next offset to send, per partition
	hwm          map[int32]int64 // the latest high watermarks seen

	buf  []*kgo.Record // fetched, not yet sent
	head int
	// seen drops, within this stream, records it already sent: copies a
	// failover wrote twice (docs/architecture.md, "Kafka store").
	seen *store.Dedup
	msg  protocol.Stored
	recs [][]byte
}

// caughtUp: every fetched record is sent, and every partition is read up
// to its end as listed at the start (or, following, as last fetched).
func (kr *kafkaReader) caughtUp() bool {
	if kr.head < len(kr.buf) {
		return false
	}
	for p, end := range kr.hwm {
		if end > kr.starts[p] && kr.pos[p] < end {
			return false
		}
	}
	return true
}

func (kr *kafkaReader) nextOffset() uint64 {
	if len(kr.ends) != 1 {
		return 0
	}
	for p, o := range kr.pos {
		return packOffset(p, o)
	}
	return 0
}

func (kr *kafkaReader) run(ctx context.Context) error {
	r, s := kr.r, kr.r.s
	sent := true // as in readStream.run: a reader starting at the end is told at once
	for {
		for r.credits.Load() > 0 && kr.head < len(kr.buf) {
			if err := kr.sendRun(); err != nil {
				return err
			}
			r.credits.Add(^uint64(0))
			sent = true
		}
		if kr.head == len(kr.buf) {
			clear(kr.buf)
			kr.buf, kr.head = kr.buf[:0], 0
		}
		caught := kr.caughtUp()
		if caught && sent {
			sent = false
			if err := r.conn.Send(&protocol.EndOfLog{Next: kr.nextOffset()}); err != nil {
				return err
			}
			if !r.follow {
				return r.finish(ctx)
			}
		}
		if kr.head < len(kr.buf) || (caught && !r.follow) {
			// Out of credit: wait for some.
			if end, err := r.wait(ctx, nil); end || err != nil {
				return err
			}
			continue
		}
		select {
		case <-r.recvDone:
			if r.follow {
				return nil
			}
		case err := <-r.errCh:
			return err
		case <-ctx.Done():
			return ctxErr(ctx)
		case <-s.closing:
			return protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := kr.cl.PollRecords(pctx, 4096)
		cancel()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			recs := p.Records
			if r.follow {
				if p.Err == nil && p.HighWatermark > kr.hwm[p.Partition] {
					kr.hwm[p.Partition] = p.HighWatermark
				}
			} else {
				// Stop at the end listed at the start.
				end := kr.ends[p.Partition]
				for len(recs) > 0 && recs[len(recs)-1].Offset >= end {
					recs = recs[:len(recs)-1]
				}
			}
			kr.buf = append(kr.buf, recs...)
		})
		if fs.NumRecords() == 0 && len(fs.Errors()) > 0 {
			// Do not spin on errors returned at once.
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sendRun sends the records at the head of buf that belong to one message
// (consecutive in one partition, same sluice headers) as one
// StoredMessage, leaving out those this stream already sent. A run of only
// such copies is sent with no records, so that its offset can be committed.
func (kr *kafkaReader) sendRun() error {
	first := kr.buf[kr.head]
	h, ok := kafkastore.ParseHeaders(first.Headers)
	kr.recs = kr.recs[:0]
	last := first
	i := kr.head
	for ; i < len(kr.buf); i++ {
		rec := kr.buf[i]
		if i > kr.head {
			if rec.Partition != last.Partition || rec.Offset != last.Offset+1 || i-kr.head >= maxReadRun {
				break
			}
			h2, ok2 := kafkastore.ParseHeaders(rec.Headers)
			if ok2 != ok || (ok && (h2.Message != h.Message || !bytes.Equal(h2.Agent, h.Agent))) {
				break
			}
			if ok {
				h.Index, h.Count = h2.Index, h2.Count
			}
		}
		if !ok || kr.seen.Observe(h.Agent, h.Message, h.Index, h.Count) {
			kr.recs = append(kr.recs, rec.Value)
		}
		last = rec
	}
	kr.msg.Offset, kr.msg.Records = packOffset(last.Partition, last.Offset), kr.recs
	kr.msg.AgentID, kr.msg.MessageID = "", 0
	if ok {
		kr.msg.AgentID, kr.msg.MessageID = string(h.Agent), h.Message
	}
	if err := kr.r.conn.Send(&kr.msg); err != nil {
		return err
	}
	kr.pos[last.Partition] = last.Offset + 1
	kr.r.s.m.readMsgs.Inc()
	kr.r.s.m.readRecords.Add(float64(len(kr.recs)))
	clear(kr.recs)
	for j := kr.head; j < i; j++ {
		kr.buf[j] = nil
	}
	kr.head = i
	return nil
}

// kafkaCommitter commits a Read stream's offsets to the Kafka consumer
// group of the stream's ReadStart.group. Commits are coalesced: the
// consumer may commit after every message, and the committer sends the
// latest offset of each partition once the previous commit returned.
type kafkaCommitter struct {
	k     *kafkastore.Store
	log   *slog.Logger
	group string
	parts map[int32]int64

	mu      sync.Mutex
	pending map[int32]int64
	kick    chan struct{}
	flushMu sync.Mutex // one commit request at a time
}

// add takes a commit from the consumer (recvLoop's goroutine).
func (c *kafkaCommitter) add(off uint64) error {
	p, o := unpackOffset(off)
	if _, ok := c.parts[p]; !ok {
		return protocol.Errorf(protocol.StatusInvalid, "commit of offset %d: partition %d is not in the Kafka topic %q", off, p, c.k.Topic())
	}
	c.mu.Lock()
	if c.pending == nil {
		c.pending = make(map[int32]int64)
	}
	c.pending[p] = o
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return nil
}

// run commits in the background until the stream ends.
func (c *kafkaCommitter) run(r *readStream) {
	for {
		select {
		case <-c.kick:
			if err := c.flush(); err != nil {
				r.fail(err)
				return
			}
		case <-r.done:
			return
		}
	}
}

// flush commits what is pending and returns once Kafka has it.
func (c *kafkaCommitter) flush() error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	batch := c.pending
	c.pending = nil
	c.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	offs := make(kadm.Offsets)
	for p, o := range batch {
		offs.Add(kadm.Offset{Topic: c.k.Topic(), Partition: p, At: o, LeaderEpoch: -1})
	}
	err := kafkastore.Retry(c.k.Context(), func(ctx context.Context) error {
		resp, err := c.k.Admin().CommitOffsets(ctx, c.group, offs)
		if err == nil {
			err = resp.Error()
		}
		return err
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
		}
		c.log.Error("sink: cannot commit group offsets to Kafka", "group", c.group, "err", err)
		return protocol.Errorf(protocol.StatusUnavailable, "commit of group %q to Kafka failed: %v", c.group, err)
	}
	return nil
}
