package sink

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/storedmsg"
)

// maxReadCredits caps a Read stream's unused credit, so that request_n
// cannot overflow it.
const maxReadCredits = 1 << 40

// readChunkBytes is the largest read size of a Read stream's store
// iterator, and minReadChunkBytes the smallest.
const (
	readChunkBytes    = 1 << 20
	minReadChunkBytes = 64 << 10
)

// readBufferBudget is shared by all Read streams: each one's chunk is this
// divided by the number of consumers, within [minReadChunkBytes,
// readChunkBytes], so that many consumers catching up at once hold about
// this much in chunks, not 1 MiB each (a record larger than the chunk is
// still read whole).
const readBufferBudget = 64 << 20

// readChunk returns the chunk size for a Read stream now.
func (s *Sink) readChunk() int {
	n := max(int(s.consumers.Load()), 1)
	return min(max(readBufferBudget/n, minReadChunkBytes), readChunkBytes)
}

// ServeRead serves one consumer's Read session (protocol.Service). See
// docs/architecture.md, "Read streams".
func (s *Sink) ServeRead(c protocol.Conn) error {
	leave, err := s.enter(c)
	if err != nil {
		return err
	}
	defer leave()
	ctx, peer := c.Context(), c.Peer()
	if err := s.checkRead(ctx, peer); err != nil {
		return err
	}
	done, err := s.admitConsumer(peer)
	if err != nil {
		return err
	}
	defer done()
	f, err := recvFirst(s, c, "ReadStart")
	if err == io.EOF {
		return protocol.Errorf(protocol.StatusInvalid, "stream closed before its ReadStart")
	}
	if err != nil {
		return err
	}
	start, ok := f.(*protocol.ReadStart)
	if !ok {
		return protocol.Errorf(protocol.StatusInvalid, "the first ReadRequest must carry a ReadStart")
	}
	group := start.Group
	if group != "" {
		if err := validGroup(group); err != nil {
			return protocol.Errorf(protocol.StatusInvalid, "%v", err)
		}
	}
	if start.FromCommitted && group == "" {
		return protocol.Errorf(protocol.StatusInvalid, "from_committed needs a group")
	}
	if s.kafka != nil {
		return s.readKafka(s.kafka, c, start)
	}
	from := start.From
	if start.FromCommitted {
		off, ok, err := s.reader.Committed(group)
		if err != nil {
			s.log.Error("sink: cannot read group offset", "group", group, "err", err)
			return protocol.Errorf(protocol.StatusInternal, "cannot read the offset of group %q", group)
		}
		if ok {
			from = off
		}
	}
	if first, next := s.reader.FirstOffset(), s.reader.NextOffset(); from < first || from > next {
		return protocol.Errorf(protocol.StatusOutOfRange, "offset %d outside the store's [%d, %d]", from, first, next)
	}
	r := newReadStream(s, c, group, start.Follow)
	r.commitFn = r.commitEmbedded
	s.m.streams.WithLabelValues("read").Inc()
	defer s.m.streams.WithLabelValues("read").Dec()
	go r.recvLoop()
	err = r.run(ctx, from)
	close(r.done)
	return err
}

func newReadStream(s *Sink, c protocol.Conn, group string, follow bool) *readStream {
	return &readStream{
		s: s, conn: c, group: group, follow: follow,
		creditCh: make(chan struct{}, 1),
		errCh:    make(chan error, 1),
		recvDone: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// readStream serves one Read stream. Its handler goroutine reads the store
// and is the only one to send; recvLoop takes credits and commits.
type readStream struct {
	s      *Sink
	conn   protocol.Conn
	group  string
	follow bool

	// commitFn applies a commit (recvLoop's goroutine); flushFn, if set,
	// makes every commit durable before recvDone closes.
	commitFn func(off uint64) error
	flushFn  func() error

	credits  atomic.Uint64
	creditCh chan struct{} // capacity 1: credit was added
	errCh    chan error    // capacity 1: recvLoop's reason to end the stream
	recvDone chan struct{} // closed when the consumer closed its side, every commit applied
	done     chan struct{}

	recs [][]byte
	msg  protocol.Stored

	// held is what this stream adds to sluice_sink_consumer_buffered_bytes.
	held int64
}

// hold sets what the stream holds in buffers to n bytes, for the gauge.
func (r *readStream) hold(n int64) {
	r.s.m.consumerBuffered.Add(float64(n - r.held))
	r.held = n
}

func (r *readStream) recvLoop() {
	for {
		f, err := r.conn.Recv()
		if err == io.EOF {
			if r.flushFn != nil {
				if err := r.flushFn(); err != nil {
					r.fail(err)
					return
				}
			}
			close(r.recvDone) // see run for what this means
			return
		}
		if err != nil {
			r.fail(err)
			return
		}
		switch f := f.(type) {
		case *protocol.ReadMore:
			if f.N == 0 {
				continue
			}
			for {
				old := r.credits.Load()
				if r.credits.CompareAndSwap(old, min(old+uint64(f.N), maxReadCredits)) {
					break
				}
			}
			select {
			case r.creditCh <- struct{}{}:
			default:
			}
		case *protocol.Commit:
			if err := r.commit(f.Offset); err != nil {
				r.fail(err)
				return
			}
		case *protocol.ReadStart:
			r.fail(protocol.Errorf(protocol.StatusInvalid, "a second ReadStart on the stream"))
			return
		default:
			r.fail(protocol.Errorf(protocol.StatusInvalid, "a %s frame on a Read session", protocol.Name(f)))
			return
		}
	}
}

func (r *readStream) fail(err error) {
	select {
	case r.errCh <- err:
	default:
	}
}

func (r *readStream) commit(off uint64) error {
	if r.group == "" {
		return protocol.Errorf(protocol.StatusInvalid, "commit without a group in ReadStart")
	}
	return r.commitFn(off)
}

func (r *readStream) commitEmbedded(off uint64) error {
	if next := r.s.reader.NextOffset(); off > next {
		return protocol.Errorf(protocol.StatusInvalid, "commit of offset %d beyond the store's next offset %d", off, next)
	}
	if err := r.s.reader.Commit(r.group, off); err != nil {
		r.s.log.Error("sink: cannot commit group offset", "group", r.group, "offset", off, "err", err)
		return protocol.Errorf(protocol.StatusUnavailable, "commit of group %q failed", r.group)
	}
	return nil
}

// run sends the store from offset from, one StoredMessage per record and
// per credit, and an EndOfLog each time it catches up.
//
// The iterator, and its chunk, exist only while there is something to
// send: a consumer waiting (caught up, or out of credit) holds no read
// buffer, so idle followers cost a few KB each.
func (r *readStream) run(ctx context.Context, from uint64) error {
	s := r.s
	defer r.hold(0)
	var it store.Iterator
	pos := from
	// sent: a message went out since the last EndOfLog (true at first so
	// that a reader starting at the end is told at once).
	sent := true
	for {
		if it == nil && r.credits.Load() > 0 && pos < s.reader.NextOffset() {
			chunk := s.readChunk()
			it = s.reader.NewIterator(pos, chunk)
			r.hold(int64(chunk))
		}
		for it != nil && r.credits.Load() > 0 && it.Next() {
			ok, err := r.send(it.Offset(), it.Value())
			if err != nil {
				return err
			}
			pos = it.Offset() + 1
			if ok {
				r.credits.Add(^uint64(0))
				sent = true
			}
		}
		if err := iterErr(it); err != nil {
			switch {
			case errors.Is(err, store.ErrTruncated):
				return protocol.Errorf(protocol.StatusOutOfRange, "%v", err)
			case errors.Is(err, store.ErrClosed):
				return protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
			}
			s.log.Error("sink: cannot read the store", "offset", pos, "err", err)
			return protocol.Errorf(protocol.StatusInternal, "cannot read the store at offset %d", pos)
		}
		caught := pos >= s.reader.NextOffset()
		if caught && sent {
			sent = false
			if err := r.conn.Send(&protocol.EndOfLog{Next: pos}); err != nil {
				return err
			}
			if !r.follow {
				return r.finish(ctx)
			}
		}
		if !caught && r.credits.Load() > 0 {
			continue
		}
		var more <-chan struct{}
		if caught {
			more = s.reader.Wait(pos)
		}
		// Let the chunk go while waiting; the next read starts a new
		// iterator at pos.
		it = nil
		r.hold(0)
		if end, err := r.wait(ctx, more); end || err != nil {
			return err
		}
	}
}

// iterErr is it's error, nil without an iterator.
func iterErr(it store.Iterator) error {
	if it == nil {
		return nil
	}
	return it.Err()
}

// finishGrace bounds how long a non-following read with a group waits,
// after its EndOfLog, for the consumer to close its side.
const finishGrace = 10 * time.Second

// finish ends a read that is not following, after its EndOfLog. Without a
// group that is at once. With one, the consumer may still have commits on
// the way: the stream stays open until the consumer closes its side (all
// its commits are then applied), for at most finishGrace.
// wait blocks until the consumer grants credit or more (nil: never) fires.
// end reports that the stream is over without error: a following consumer
// closed its side, so its commits are applied and the stream ends.
func (r *readStream) wait(ctx context.Context, more <-chan struct{}) (end bool, err error) {
	select {
	case <-r.creditCh:
	case <-more:
	case <-r.recvDone:
		if r.follow {
			return true, nil
		}
		// Not caught up and out of credit (else the reader would not
		// wait), and no credit can come any more.
		return false, protocol.Errorf(protocol.StatusFailedPrecondition, "the consumer closed its side without the credit to read to the end")
	case err := <-r.errCh:
		return false, err
	case <-ctx.Done():
		return false, ctxErr(ctx)
	case <-r.s.closing:
		return false, protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
	}
	return false, nil
}

func (r *readStream) finish(ctx context.Context) error {
	if r.group == "" {
		return nil
	}
	select {
	case <-r.recvDone:
		return nil
	case err := <-r.errCh:
		return err
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-r.s.closing:
		return protocol.Errorf(protocol.StatusUnavailable, "sink is shutting down")
	case <-time.After(finishGrace):
		return nil
	}
}

// send decodes one store record and sends it. A record that is not a
// valid stored message (which the sink never writes) is skipped with an
// error log, using no credit: it holds nothing a consumer could use.
func (r *readStream) send(off uint64, rec []byte) (sent bool, err error) {
	s := r.s
	m, err := storedmsg.Decode(rec)
	if err == nil {
		// zstd decoders (and their windows) are shared by all Read
		// streams instead of each consumer keeping its own.
		dec := s.readDecoders.Get().(*store.BodyDecoder)
		defer s.readDecoders.Put(dec)
		var body []byte
		// Decompression buffers are shared by all streams (and the
		// validation of incoming batches) instead of each consumer
		// keeping one as large as the largest message it read.
		if m.Codec != codec.Plain {
			bufp := decodeBufs.Get().(*[]byte)
			defer func() {
				r.s.m.consumerBuffered.Sub(float64(cap(*bufp)))
				if cap(*bufp) <= 8<<20 {
					decodeBufs.Put(bufp)
				}
			}()
			body, err = dec.Decode((*bufp)[:0], string(m.AgentID), m.Codec, m.DictID, m.Body)
			if err == nil {
				*bufp = body[:0]
			}
			r.s.m.consumerBuffered.Add(float64(cap(*bufp)))
		} else {
			body, err = dec.Decode(nil, string(m.AgentID), m.Codec, m.DictID, m.Body)
		}
		if err == nil {
			r.recs = r.recs[:0]
			err = batch.Decode(body, func(rec []byte) error {
				r.recs = append(r.recs, rec)
				return nil
			})
		}
	}
	if err != nil {
		s.m.corrupt.Inc()
		s.log.Error("sink: store record cannot be decoded; skipped", "offset", off, "err", err)
		return false, nil
	}
	r.msg.Offset, r.msg.AgentID, r.msg.MessageID, r.msg.Records = off, string(m.AgentID), m.MessageID, r.recs
	// Send encodes (or copies) before returning, so the buffers the
	// records alias may be reused afterwards.
	if err := r.conn.Send(&r.msg); err != nil {
		return false, err
	}
	s.m.readMsgs.Inc()
	s.m.readRecords.Add(float64(len(r.recs)))
	clear(r.recs)
	return true, nil
}
