package rsocket

import (
	"context"
	"errors"
	"io"
	"slices"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// open sends a request, waiting for a LEASE when lease was negotiated and
// none allows the request yet.
func (c *Conn) open(ctx context.Context, kind conn.Interaction, p Payload, n uint32, complete bool) (*stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.closedErr()
	}
	st, err, wait := c.openLocked(ctx, kind, p, n, complete)
	if !wait {
		c.release()
		return st, err
	}
	type res struct {
		st  *stream
		err error
	}
	ch := make(chan res, 1)
	var attempt func()
	attempt = func() {
		st, err, wait := c.openLocked(ctx, kind, p, n, complete)
		if wait {
			c.leaseWait = append(c.leaseWait, attempt)
			return
		}
		ch <- res{st, err}
	}
	c.leaseWait = append(c.leaseWait, attempt)
	c.release()
	select {
	case r := <-ch:
		return r.st, r.err
	case <-c.done:
		return nil, c.closedErr()
	case <-ctx.Done():
		// The request may still go out; a late stream is cancelled.
		go func() {
			select {
			case r := <-ch:
				if r.st != nil {
					c.post(func() { c.cancelStream(r.st, ctx.Err()) })
				}
			case <-c.done:
			}
		}()
		return nil, ctx.Err()
	}
}

// openRR sends the request of st, a request-response that RequestResponse
// waits on. Under mu.
func (c *Conn) openRR(ctx context.Context, st *stream, p Payload) {
	id, err := c.machine.RequestResponse(c.now(), p.Metadata, p.Data)
	if errors.Is(err, conn.ErrNoLease) {
		if closed, _ := c.machine.Closed(); !closed {
			c.leaseWait = append(c.leaseWait, func() { c.openRR(ctx, st, p) })
			return
		}
	}
	if err != nil {
		st.fail(err)
		return
	}
	st.id = id
	c.streams[id] = st
	if ctx.Done() != nil {
		c.watch(ctx, st)
	}
}

// openLocked sends the request now; wait: no lease allows it yet. Under mu.
func (c *Conn) openLocked(ctx context.Context, kind conn.Interaction, p Payload, n uint32, complete bool) (st *stream, err error, wait bool) {
	var id uint32
	switch kind {
	case conn.RequestResponse:
		id, err = c.machine.RequestResponse(c.now(), p.Metadata, p.Data)
	case conn.FireAndForget:
		id, err = c.machine.RequestFNF(c.now(), p.Metadata, p.Data)
	case conn.RequestStream:
		id, err = c.machine.RequestStream(c.now(), n, p.Metadata, p.Data)
	case conn.RequestChannel:
		id, err = c.machine.RequestChannel(c.now(), n, p.Metadata, p.Data, complete)
	}
	if errors.Is(err, conn.ErrNoLease) {
		if closed, _ := c.machine.Closed(); !closed {
			return nil, nil, true
		}
	}
	if err != nil || kind == conn.FireAndForget {
		return nil, err, false
	}
	st = c.newStream(id, kind, true, c.ctx)
	if kind == conn.RequestChannel && complete {
		st.sendDone = true
	}
	if ctx.Done() != nil {
		// Context cancel → CANCEL frame; watching stops when the stream ends.
		stop := context.AfterFunc(ctx, func() { c.post(func() { c.cancelStream(st, ctx.Err()) }) })
		st.cancel = func() { stop() }
	}
	return st, nil, false
}

// cancelStream sends CANCEL (requester) or ERROR[CANCELED] and forgets
// the stream. Under mu.
func (c *Conn) cancelStream(st *stream, err error) {
	if c.streams[st.id] != st {
		return
	}
	if st.requester && !st.recvDone {
		_ = c.machine.Cancel(st.id)
	} else if st.requester && st.kind == conn.RequestChannel && !st.sendDone {
		_ = c.machine.Complete(st.id)
	}
	if st.callback == nil {
		st.mu.Lock()
		st.queue = []item{{err: err}} // a cancelled stream delivers nothing more
		st.cancelled.Store(true)
		st.ended = true
		st.mu.Unlock()
	}
	st.fail(err) // wakes Next, fails a parked Send; RequestResponseFunc: its callback
	delete(c.streams, st.id)
}

// RequestResponse sends p and waits for the one response.
func (c *Conn) RequestResponse(ctx context.Context, p Payload) (Payload, error) {
	if err := ctx.Err(); err != nil {
		return Payload{}, err
	}
	st := &stream{kind: conn.RequestResponse, requester: true, ready: make(chan struct{}, 1), cancel: noop}
	st.queue = st.queueArray[:0]
	c.submit(op{st: st, ctx: ctx, p: p})
	it, err := st.pop(ctx)
	if err != nil {
		// Cancelled before the answer: CANCEL if the request went out.
		c.post(func() { c.cancelStream(st, err) })
		return Payload{}, err
	}
	if err != nil {
		return Payload{}, err
	}
	if it.err != nil {
		return Payload{}, it.err
	}
	return it.p, nil
}

// RequestResponseFunc sends p and returns at once; fn gets the response
// or the error, exactly once. It costs no goroutine: with many requests in
// flight on a connection this is much cheaper than a goroutine blocked in
// RequestResponse each. fn runs on a goroutine of the connection (usually
// its reader) after the connection's lock is released, one callback at a
// time per connection: it may send further requests with
// RequestResponseFunc, but must not block (not even on RequestResponse of
// the same connection), or the connection stalls. The response's slices
// belong to fn. Cancelling ctx sends CANCEL and fn gets ctx's error.
func (c *Conn) RequestResponseFunc(ctx context.Context, p Payload, fn func(Payload, error)) {
	if err := ctx.Err(); err != nil {
		fn(Payload{}, err)
		return
	}
	st := newFuncStream(c, fn)
	c.submit(op{st: st, ctx: ctx, p: p})
}

// FireAndForget sends p; no answer comes.
func (c *Conn) FireAndForget(ctx context.Context, p Payload) error {
	_, err := c.open(ctx, conn.FireAndForget, p, 0, false)
	return err
}

// MetadataPush sends a METADATA_PUSH.
func (c *Conn) MetadataPush(ctx context.Context, metadata []byte) error {
	return c.do(func() error { return c.machine.MetadataPush(metadata) })
}

// RequestStream opens a stream with n initial credits (n >= 1). The
// returned Stream tops the credits up to n each time half of them were
// consumed, so the responder never has more than n elements unconsumed
// in flight; Request adds credits beyond that.
// Cancelling ctx sends CANCEL.
func (c *Conn) RequestStream(ctx context.Context, p Payload, n uint32) (*Stream, error) {
	st, err := c.open(ctx, conn.RequestStream, p, n, false)
	if err != nil {
		return nil, err
	}
	return &Stream{c: c, st: st, batch: n, left: n, ctx: ctx}, nil
}

// RequestChannel opens a channel whose first payload is p, granting n
// credits (batches of n as for RequestStream). Send more with the
// Channel's Send (it waits for the responder's credits) and end our half
// with Complete.
func (c *Conn) RequestChannel(ctx context.Context, p Payload, n uint32) (*Channel, error) {
	st, err := c.open(ctx, conn.RequestChannel, p, n, false)
	if err != nil {
		return nil, err
	}
	return &Channel{Stream: Stream{c: c, st: st, batch: n, left: n, ctx: ctx}, Sink: Sink{c: c, st: st}}, nil
}

// Stream is the receiving side of a stream or channel: a pull iterator
// that manages REQUEST_N credits.
type Stream struct {
	c     *Conn
	st    *stream
	ctx   context.Context
	batch uint32 // granted again when left reaches 0
	left  uint32 // credits granted and not yet used
	bytes int64  // bytes consumed and not yet granted again (bytecredits.go)
}

// Next returns the next element; io.EOF when the stream completed, an
// *Error when it ended with ERROR, ctx's error when cancelled.
func (s *Stream) Next() (Payload, error) {
	ctx := s.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	for {
		if err := ctx.Err(); err != nil {
			return Payload{}, err // cancelled: queued elements are dropped
		}
		it, err := s.st.pop(ctx)
		if err != nil {
			return Payload{}, err
		}
		if it.err != nil {
			s.st.requeue(it) // keep failing
			return Payload{}, it.err
		}
		if it.next {
			if it.complete {
				s.st.requeue(item{complete: true}) // the next Next gives io.EOF
			}
			s.used()
			s.usedBytes(it.p)
			return it.p, nil
		}
		if it.complete {
			s.st.requeue(item{complete: true})
			return Payload{}, io.EOF
		}
	}
}

// Release gives back p, a payload Next returned, once the application is
// done with its bytes: nothing may use p's Metadata or Data after. The
// stream's later large payloads (32 KiB of data and more) are then
// copied into the buffers given back instead of fresh memory the
// collector reclaims: a stream of large payloads, such as a file upload's
// chunks, costs no allocation per payload and copies into memory still
// in the cache. What the stream does not keep goes to the frame pool,
// for other streams. Optional; a payload not released is collected as
// usual. Releasing an empty Payload only declares that the application
// will release: call it before the first Next so that the stream's first
// payloads already come in recycled buffers.
func (s *Stream) Release(p Payload) {
	st := s.st
	st.recycles.Store(true)
	if len(p.Data) < minRecycled {
		return
	}
	if buf := st.unlend(p.Data); buf != nil {
		frame.PutBuf(buf) // the frame's own buffer: the reader takes it again
		return
	}
	st.mu.Lock()
	keep := st.spareBytes+cap(p.Data) <= s.c.maxSpares()
	if keep {
		st.spares = append(st.spares, p.Data[:0])
		st.spareBytes += cap(p.Data)
	}
	st.mu.Unlock()
	if !keep {
		frame.PutBuf(p.Data) // kept if its capacity is a pool class's
	}
}

// lend records buf, a frame's pooled buffer whose first n bytes are the
// frame, while the application holds a payload in it, until Release
// gives it back; false (buf stays the reader's) when buf is nil or the
// stream's application holds max bytes of them already.
func (st *stream) lend(buf []byte, n, max int) bool {
	if buf == nil {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lentBytes+cap(buf) > max {
		return false
	}
	st.lent = append(st.lent, lentFrame{buf: buf, n: n})
	st.lentBytes += cap(buf)
	return true
}

// lentFrame is a frame buffer lent to the application: buf[:n] was the
// frame, whose payload data was its tail.
type lentFrame struct {
	buf []byte
	n   int
}

// unlend takes back the frame buffer that data, a payload's, is the tail
// of; nil when data is in none (a copy).
func (st *stream) unlend(data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	last := &data[len(data)-1]
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, l := range st.lent {
		if &l.buf[:l.n][l.n-1] == last {
			st.lent = slices.Delete(st.lent, i, i+1)
			st.lentBytes -= cap(l.buf)
			return l.buf
		}
	}
	return nil
}

// spare takes a buffer of n bytes from the payloads the application gave
// back (Release); nil when none is large enough.
func (st *stream) spare(n int) []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := len(st.spares) - 1; i >= 0; i-- {
		if b := st.spares[i]; cap(b) >= n {
			st.spares = slices.Delete(st.spares, i, i+1)
			st.spareBytes -= cap(b)
			return b[:n]
		}
	}
	return nil
}

// push after ended is a no-op; re-queue terminal items directly.
func (st *stream) requeue(it item) {
	st.mu.Lock()
	st.queue = append(st.queue, it)
	st.mu.Unlock()
	st.wake()
}

func (s *Stream) used() {
	if s.left > 0 {
		s.left--
	}
	// Top the credits up to a full batch once half are used, so the
	// responder does not stall for a round trip at each batch boundary.
	if s.batch > 0 && s.left <= s.batch/2 {
		n := s.batch - s.left
		s.left = s.batch
		st := s.st
		s.c.post(func() {
			if s.c.streams[st.id] == st && !st.recvDone {
				_ = s.c.machine.RequestN(st.id, n)
			}
		})
	}
}

// Request grants n more credits.
func (s *Stream) Request(n uint32) error {
	st := s.st
	return s.c.do(func() error {
		if s.c.streams[st.id] != st {
			return nil
		}
		return s.c.machine.RequestN(st.id, n)
	})
}

// Cancel ends the stream: CANCEL to the responder; Next then fails.
func (s *Stream) Cancel() {
	st := s.st
	s.c.post(func() { s.c.cancelStream(st, context.Canceled) })
}

// Sink sends PAYLOADs on a stream or channel.
type Sink struct {
	c    *Conn
	st   *stream
	done bool
	req  sendReq // reused: Send is not called concurrently, each waits for its answer
}

// Send sends p, waiting for a credit from the peer. It fails once the
// stream is over (cancelled by the peer, failed, connection closed). When
// it returns, p's bytes were copied into the frames (or will never be
// sent): the caller may reuse them.
func (s *Sink) Send(p Payload) error { return s.send(p, true, false) }

// SendLent is Send without copying a large p.Data into its frame: on a
// TCP connection without resumption, data of 64 KiB or more
// (conn.MinLent) that fits one frame stays the caller's memory, and the
// writer sends it from there right after the frame's head (one writev),
// so the bytes on the wire are Send's. The caller must keep p.Data
// unchanged until written is called: once, when the connection no longer
// refers to it (written to the socket, or dropped with a failed
// connection), at once if it was copied after all. written runs under
// the connection's lock, on any goroutine, possibly before SendLent
// returns: it must only signal (a WaitGroup's Done, a non-blocking
// send). When SendLent returns an error, written is not called and
// nothing refers to p.Data. p.Metadata is copied, as by Send. The output
// queue's budget counts the lent bytes.
func (s *Sink) SendLent(p Payload, written func()) error {
	s.req.written = written
	err := s.send(p, true, false)
	s.req.written = nil
	return err
}

// Complete ends our half of the stream.
func (s *Sink) Complete() error {
	if s.done {
		return nil
	}
	s.done = true
	return s.send(Payload{}, false, true)
}

// Error ends the stream with an ERROR (see Responder for the code).
func (s *Sink) Error(err error) error {
	if s.done {
		return nil
	}
	s.done = true
	st := s.st
	return s.c.do(func() error {
		if s.c.streams[st.id] != st {
			return nil
		}
		code, msg := toError(err)
		e := s.c.machine.SendError(st.id, code, msg)
		// An ERROR ends the stream both ways: Next returns err from now
		// on. Before, a requester channel's Next, whose stream was gone
		// from the map, waited for ever (found by hand, 2026-11-29:
		// `rsocket channel` hung on a stdin line too long).
		st.fail(err)
		delete(s.c.streams, st.id)
		return e
	})
}

func (s *Sink) send(p Payload, next, complete bool) error {
	c, st, r := s.c, s.st, &s.req
	if c.overBudget() && !c.waitOutbound(nil) {
		// Credits alone do not bound a stream (a peer may grant 2^31-1
		// and read nothing): Send also waits for outbound room.
		return c.closedErr()
	}
	if r.done == nil {
		r.done = make(chan error, 1)
	}
	r.p, r.next, r.complete = p, next, complete
	if c.mu.TryLock() {
		// The common case, a handler streaming while nobody else holds
		// mu: send now, with no command queued and no goroutine woken.
		if c.closed {
			c.mu.Unlock()
			c.combine()
			return c.closedErr()
		}
		c.trySend(st, r)
		c.release()
	} else {
		c.submit(op{fn: func() { c.trySend(st, r) }})
	}
	select {
	case err := <-r.done:
		return err
	case <-c.done:
		select {
		case err := <-r.done:
			return err
		default:
			return c.closedErr()
		}
	}
}

// finish ends a responder's stream after its handler returned.
func (s *Sink) finish(err error) {
	if err != nil {
		_ = s.Error(err)
		return
	}
	_ = s.Complete()
}

// Channel is a requester's channel: receive with Next, send with Send.
type Channel struct {
	Stream
	Sink
}

// Cancel cancels the channel.
func (ch *Channel) Cancel() { ch.Stream.Cancel() }

// Done is closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// OversizeFNFDropped returns how many fire-and-forget requests from the
// peer were dropped for exceeding WithMaxPayloadSize: there is no stream
// to answer them on (other requests over it are answered ERROR[INVALID]).
func (c *Conn) OversizeFNFDropped() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.machine.OversizeFNFDropped()
}

// PayloadsLent returns how many payloads SendLent sent from the caller's
// memory, without copying their data into a frame.
func (c *Conn) PayloadsLent() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lentCount
}

// Err is why the connection closed (after Done).
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close closes the connection: gracefully (ERROR[CONNECTION_CLOSE]) when no
// stream is alive, else with ERROR[CONNECTION_ERROR], failing the streams.
// It returns once what was queued (a fire-and-forget just sent) was
// written and the transport closed, so a process may exit right after.
func (c *Conn) Close() error {
	_ = c.do(func() error {
		if c.machine.NumStreams() == 0 {
			return c.machine.Close(frame.ErrorCodeConnectionClose, "closed by the application")
		}
		return c.machine.Close(frame.ErrorCodeConnectionError, "closed by the application")
	})
	<-c.done
	<-c.writerDone
	return nil
}
