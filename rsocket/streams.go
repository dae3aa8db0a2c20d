package rsocket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/rsocket/conn"
)

// Streams: the driver's side of each stream, either role (stream), made by
// newStream or, for RequestResponseFunc, taken from a pool
// (newFuncStream). The machine's requests start handlers (request); their
// answers and elements go out under mu (answer, trySend). Items for the
// application are queued on the stream under its own mu (push, fail) and
// taken by pop in batches, so that the reader and the consumer meet on the
// lock once per batch, not per item.

// stream is the driver's side of one stream, either role.
type stream struct {
	id         uint32
	kind       conn.Interaction
	requester  bool
	ctx        context.Context // responder only: the handler's
	cancel     func()          // responder: ends ctx; requester: stops watching the caller's ctx
	sendDone   bool
	recvDone   bool
	parked     *sendReq             // a Send waiting for credits
	callback   func(Payload, error) // requester of RequestResponseFunc: gets the answer instead of queue
	pooled     bool                 // recycled once forgotten (funcStreams)
	watchedCtx context.Context      // requester of a request-response: the caller's context, watched (watch)

	responderCtx handlerCtx // responder: ctx
	conn         *Conn      // responder of a request-response: for run
	request      Payload    // its request, until run takes it

	mu         sync.Mutex
	queue      []item
	queueArray [1]item // queue's first array: most streams (request-response) hold one item
	popped     []item  // what pop took from queue and has not returned (popped[poppedNext:]); pop's own
	poppedNext int
	cancelled  atomic.Bool // cancelled: popped is dropped as queue was
	// recycles: the application gives this stream's payloads back
	// (Stream.Release), so large ones are copied into pooled buffers
	// (Conn.streamPayload). Set by the application, read under Conn.mu.
	recycles   atomic.Bool
	spares     [][]byte    // buffers of released payloads (Stream.Release); under mu
	spareBytes int         // their capacity
	lent       []lentFrame // frame buffers the application holds payloads in (Conn.streamPayload); under mu
	lentBytes  int         // their capacity
	ready      chan struct{}
	ended      bool // a terminal item was queued
}

type item struct {
	p        Payload
	next     bool
	complete bool
	err      error
}

type sendReq struct {
	p        Payload
	next     bool
	complete bool
	written  func() // SendLent's: p.Data may be lent to the writer
	done     chan error
}

func (c *Conn) newStream(id uint32, kind conn.Interaction, requester bool, parent context.Context) *stream {
	st := &stream{id: id, kind: kind, requester: requester, cancel: noop}
	st.queue = st.queueArray[:0]
	if requester || kind == conn.RequestChannel {
		st.ready = make(chan struct{}, 1) // only these are read with pop
	}
	if !requester {
		st.responderCtx.parent = parent
		st.ctx, st.cancel = &st.responderCtx, st.responderCtx.cancel
	}
	switch {
	case requester && kind != conn.RequestChannel:
		st.sendDone = true
	case !requester && kind != conn.RequestChannel:
		st.recvDone = true
	}
	c.streams[id] = st
	return st
}

func (c *Conn) request(ev *conn.Event) {
	h := c.opts.responder
	if ev.Interaction == conn.RequestResponse && c.opts.inline {
		// NonBlocking: answer here, on the reader, under mu. The event's
		// bytes stay valid during the call and SendPayload copies the
		// answer into the output, so nothing is copied for the handler.
		var resp Payload
		err := guard(func() (err error) {
			resp, err = h.RequestResponse(c.ctx, Payload{Metadata: ev.Metadata, Data: ev.Data})
			return
		})
		if err != nil {
			code, msg := toError(err)
			_ = c.machine.SendError(ev.StreamID, code, msg)
		} else {
			_ = c.machine.SendPayload(ev.StreamID, resp.Metadata, resp.Data, true, true)
		}
		return
	}
	p := c.inboundPayload(ev)
	switch ev.Interaction {
	case conn.FireAndForget:
		c.goOneway(func() { _ = guard(func() error { h.FireAndForget(c.ctx, p); return nil }) }, p)
	case conn.RequestResponse:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.handlerParent)
		st.conn, st.request = c, p
		c.hold(heldSize(p))
		goWork(st) // runs respond
	case conn.RequestStream:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.handlerParent)
		sink := &Sink{c: c, st: st}
		goWork(funcRunner(func() { sink.finish(guard(func() error { return h.RequestStream(st.ctx, p, sink) })) }))
	case conn.RequestChannel:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.handlerParent)
		st.recycles.Store(c.opts.releasedChannels)
		in := &Stream{c: c, st: st, batch: c.opts.channelN}
		if ev.Complete {
			st.recvDone = true
			st.push(item{complete: true})
		} else if c.opts.channelN > 0 {
			_ = c.machine.RequestN(st.id, c.opts.channelN)
			in.left = c.opts.channelN
		}
		sink := &Sink{c: c, st: st}
		goWork(funcRunner(func() { sink.finish(guard(func() error { return h.RequestChannel(st.ctx, p, in, sink) })) }))
	}
}

// run answers a request-response on a pooled goroutine (see goWork): the
// stream carries what a closure would, so a request costs no closure.
func (st *stream) run() {
	c, p := st.conn, st.request
	st.request = Payload{}
	n := heldSize(p)
	var resp Payload
	err := guard(func() (err error) { resp, err = c.opts.responder.RequestResponse(st.ctx, p); return })
	if c.overBudget() {
		c.waitOutbound(nil) // the answer waits for room (closed: runOps drops it)
	}
	c.submit(op{st: st, p: resp, err: err, answer: true})
	// Held until its answer is queued, where peerOut counts it: a handler
	// waiting for outbound room keeps the reader stopped.
	c.releaseHeld(n)
}

// answer sends a request-response handler's answer. Under mu.
func (c *Conn) answer(st *stream, resp Payload, err error) {
	if c.streams[st.id] != st {
		return // cancelled meanwhile
	}
	if err != nil {
		code, msg := toError(err)
		_ = c.machine.SendError(st.id, code, msg)
	} else {
		_ = c.machine.SendPayload(st.id, resp.Metadata, resp.Data, true, true)
	}
	c.peerOutAdded = true // output the peer's request caused
	st.cancel()
	delete(c.streams, st.id)
}

// guard runs a handler and turns its panic into an APPLICATION_ERROR, so
// one bad request cannot take the process and every connection down.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = ApplicationError("handler panicked: %v", r)
		}
	}()
	return f()
}

// trySend sends r on st now, or parks it until credits arrive. Under mu.
func (c *Conn) trySend(st *stream, r *sendReq) {
	if c.streams[st.id] != st || st.sendDone {
		r.done <- fmt.Errorf("rsocket: stream %d is over: %w", st.id, context.Canceled)
		return
	}
	var lent bool
	var err error
	if r.written != nil && c.mayLend() {
		lent, err = c.machine.SendPayloadLent(st.id, r.p.Metadata, r.p.Data, r.next, r.complete)
	} else {
		err = c.machine.SendPayload(st.id, r.p.Metadata, r.p.Data, r.next, r.complete)
	}
	if errors.Is(err, conn.ErrNoCredits) {
		st.parked = r
		return
	}
	if lent {
		c.lentWritten = append(c.lentWritten, r.written) // drain queues it with the data
		c.lentCount++
	} else if err == nil && r.written != nil {
		r.written() // copied into its frame
	}
	if err == nil && !st.requester {
		c.peerOutAdded = true // a responder's element: the peer's request caused it
	}
	if err == nil && r.complete {
		st.sendDone = true
		c.maybeForget(st)
	}
	r.done <- err
}

// mayLend reports whether the writer can take a payload's data as a
// piece of its own (Sink.SendLent): on a byte stream, written with writev;
// a WebSocket message is one frame, built whole. Under mu.
func (c *Conn) mayLend() bool {
	_, ok := c.transport.(*streamTransport)
	return ok
}

func (c *Conn) maybeForget(st *stream) {
	if st.sendDone && st.recvDone {
		st.cancel()
		c.unwatch(st)
		delete(c.streams, st.id)
		if st.pooled {
			*st = stream{}
			funcStreams.Put(st)
		}
	}
}

// funcStreams recycles the streams of RequestResponseFunc calls: once
// answered nothing refers to them (the callback got its own copy of the
// answer; a context watch finds its streams through the stream map), so a
// request costs no allocation for its stream.
var funcStreams = sync.Pool{New: func() any { return new(stream) }}

func newFuncStream(c *Conn, fn func(Payload, error)) *stream {
	st := funcStreams.Get().(*stream)
	st.kind, st.requester, st.cancel, st.conn, st.callback, st.pooled = conn.RequestResponse, true, noop, c, fn, true
	return st
}

func (st *stream) push(it item) {
	st.mu.Lock()
	if st.callback != nil {
		// RequestResponseFunc: the first item (answer or error) is the
		// only one; it goes to the callback.
		ended := st.ended
		st.ended = true
		st.mu.Unlock()
		if !ended {
			st.conn.queueCallback(st.callback, it)
		}
		return
	}
	if !st.ended {
		st.queue = append(st.queue, it)
		if it.err != nil || it.complete {
			st.ended = true
		}
	}
	st.mu.Unlock()
	st.wake()
}

// wake signals pop; streams nobody pops have no ready.
func (st *stream) wake() {
	if st.ready == nil {
		return
	}
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

func (st *stream) fail(err error) {
	st.push(item{err: err})
	if st.parked != nil {
		st.parked.done <- err
		st.parked = nil
	}
	st.cancel()
	if st.watchedCtx != nil {
		st.conn.unwatch(st)
	}
}

// pop waits for the next item. It takes everything queued at once into
// popped, its own buffer, and serves from there without the lock: the reader
// pushing and the consumer popping then meet on mu once per batch, not
// per item, and the two buffers are reused in turn instead of growing.
func (st *stream) pop(ctx context.Context) (item, error) {
	for {
		if st.poppedNext < len(st.popped) {
			if !st.cancelled.Load() {
				it := st.popped[st.poppedNext]
				st.popped[st.poppedNext] = item{}
				st.poppedNext++
				return it, nil
			}
			clear(st.popped[st.poppedNext:]) // cancelled: what was taken is dropped too
			st.poppedNext = len(st.popped)
		}
		st.mu.Lock()
		if len(st.queue) > 0 {
			st.popped, st.queue = st.queue, st.popped[:0]
			st.poppedNext = 0
			st.mu.Unlock()
			continue
		}
		st.mu.Unlock()
		select {
		case <-st.ready:
		case <-ctx.Done():
			return item{}, ctx.Err()
		}
	}
}
