package rsocket

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// transport moves frames. readFrame returns one frame without its length
// prefix (it may reuse buf); writeFrames writes length-prefixed frames.
type transport interface {
	readFrame(buf []byte) ([]byte, error)
	writeFrames(out []byte) error
	Close() error
}

// Conn is one RSocket connection, client or server end.
type Conn struct {
	opts  options
	m     *conn.Machine
	tr    transport
	start time.Time

	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc

	cmds chan func()
	in   chan inFrame // frames, then the read error, in order
	// consumed: the loop took a large frame. The reader hands large
	// frames over one at a time, so the queue holds at most 64 small
	// frames (4 MiB) and one large one, not 64 frames of 16 MiB.
	consumed chan struct{}
	done     chan struct{} // closed when the loop ends
	err      error         // why, valid after done

	// Loop-owned state.
	streams   map[uint32]*stream
	out       []byte // frames not yet handed to the writer
	w         *writer
	leaseWait []func()
	leaseT    *time.Timer
	setup     chan struct{} // closed on EventSetup (server) or Start (client)

	bufs sync.Pool
	// oneway bounds the fire-and-forget and metadata-push handlers running
	// at once: they keep no stream, so MaxStreams does not bound them, and
	// a flood must not become a flood of goroutines. When full, the loop
	// waits, which stops reading and pushes back on the peer through TCP.
	oneway chan struct{}
}

// stream is the driver's side of one stream, either role.
type stream struct {
	id        uint32
	kind      conn.Interaction
	requester bool
	ctx       context.Context
	cancel    context.CancelFunc
	sendDone  bool
	recvDone  bool
	parked    *sendReq // a Send waiting for credits

	mu    sync.Mutex
	q     []item
	sig   chan struct{}
	ended bool // a terminal item was queued
}

type inFrame struct {
	b   []byte
	err error
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
	done     chan error
}

func newConn(ctx context.Context, tr transport, o options) (*Conn, error) {
	now := time.Duration(0)
	m, err := conn.New(o.cfg, now)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		opts: o, m: m, tr: tr, start: time.Now(),
		cmds: make(chan func(), 256), in: make(chan inFrame, 64), consumed: make(chan struct{}, 1),
		done:    make(chan struct{}),
		streams: map[uint32]*stream{}, setup: make(chan struct{}),
		oneway: make(chan struct{}, maxOneway),
	}
	if o.responder == nil {
		c.opts.responder = UnimplementedResponder{}
	}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.w = newWriter(tr, func(err error) { c.post(func() { c.m.TransportClosed(err) }) })
	return c, nil
}

const maxOneway = 1024

// goOneway runs a fire-and-forget or metadata-push handler within the
// oneway bound. Loop only.
func (c *Conn) goOneway(f func()) {
	c.oneway <- struct{}{}
	go func() {
		defer func() { <-c.oneway }()
		f()
	}()
}

func (c *Conn) now() time.Duration { return time.Since(c.start) }

func (c *Conn) run() {
	go c.readLoop()
	go c.w.run()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if c.drain() {
			return
		}
		if len(c.in) == 0 && len(c.cmds) == 0 {
			c.flush()
		}
		if t, ok := c.m.NextDeadline(); ok {
			timer.Reset(max(t-c.now(), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case f := <-c.in:
			if f.err != nil {
				c.m.TransportClosed(f.err)
				continue
			}
			c.m.Receive(c.now(), f.b)
			if len(f.b) > largeFrame {
				c.consumed <- struct{}{}
			}
			c.putBuf(f.b)
		case cmd := <-c.cmds:
			cmd()
		case <-timer.C:
			c.m.Tick(c.now())
		}
	}
}

func (c *Conn) getBuf() []byte {
	if b, ok := c.bufs.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 0, 4096)
}

func (c *Conn) putBuf(b []byte) {
	if cap(b) > 1<<20 { // do not keep fragments of huge payloads
		return
	}
	c.bufs.Put(&b)
}

func (c *Conn) readLoop() {
	for {
		// The error travels on the same channel as the frames: on a
		// separate one the loop's select could see EOF before the last
		// frames (a fire-and-forget just before the peer closed).
		f, err := c.tr.readFrame(c.getBuf())
		select {
		case c.in <- inFrame{b: f, err: err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
		if len(f) > largeFrame {
			select {
			case <-c.consumed:
			case <-c.done:
				return
			}
		}
	}
}

// largeFrame: frames above it are handed to the loop one at a time.
const largeFrame = 64 << 10

// post queues fn for the loop without waiting; dropped after close.
func (c *Conn) post(fn func()) {
	select {
	case c.cmds <- fn:
	case <-c.done:
	}
}

// do runs fn on the loop and returns its error.
func (c *Conn) do(fn func() error) error {
	res := make(chan error, 1)
	select {
	case c.cmds <- func() { res <- fn() }:
	case <-c.done:
		return c.closedErr()
	}
	select {
	case err := <-res:
		return err
	case <-c.done:
		select {
		case err := <-res:
			return err
		default:
			return c.closedErr()
		}
	}
}

func (c *Conn) closedErr() error {
	if c.err != nil {
		return fmt.Errorf("%w: %v", ErrClosed, c.err)
	}
	return ErrClosed
}

func (c *Conn) flush() {
	if len(c.out) > 0 {
		c.w.enqueue(c.out)
		c.out = c.out[:0]
	}
}

// drain moves the machine's output to c.out and dispatches its events. It
// returns true when the connection is closed and the loop must end.
func (c *Conn) drain() bool {
	closed := false
	var later []conn.Event
	for {
		rd := c.m.Ready()
		if len(rd.Out) == 0 && len(rd.Events) == 0 && len(later) == 0 {
			break
		}
		nOut, nEv := len(rd.Out), len(rd.Events)
		c.out = append(c.out, rd.Out...)
		for i := range rd.Events {
			if c.event(&rd.Events[i]) {
				closed = true
			}
		}
		// Commands the handlers issued appended to the machine's output
		// and events, which Advance would drop: keep them (deep copies,
		// since Advance also releases the arena) before advancing.
		rd = c.m.Ready()
		c.out = append(c.out, rd.Out[nOut:]...)
		later = later[:0]
		for _, ev := range rd.Events[nEv:] {
			ev.Metadata, ev.Data = clone(ev.Metadata), clone(ev.Data)
			later = append(later, ev)
		}
		c.m.Advance()
		for i := range later {
			if c.event(&later[i]) {
				closed = true
			}
		}
		later = later[:0]
	}
	if closed {
		c.flush()
		c.w.finish()
		c.cancel()
		for id, st := range c.streams {
			st.fail(c.closedErr())
			delete(c.streams, id)
		}
		if c.leaseT != nil {
			c.leaseT.Stop()
		}
		close(c.done)
	}
	return closed
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

func (c *Conn) event(ev *conn.Event) bool {
	switch ev.Kind {
	case conn.EventSetup:
		if ev.Setup.Lease && !c.opts.lease {
			_ = c.m.Close(frame.ErrorCodeRejectedSetup, "lease is not enabled on this server")
			return false
		}
		if ev.Setup.Lease {
			c.grantLease()
		}
		close(c.setup)
		if c.opts.onConnect != nil {
			go c.opts.onConnect(c)
		}
	case conn.EventRequest:
		c.request(ev)
	case conn.EventPayload:
		st := c.streams[ev.StreamID]
		if st == nil {
			return false
		}
		st.push(item{p: Payload{Metadata: clone(ev.Metadata), Data: clone(ev.Data)}, next: ev.Next, complete: ev.Complete})
		if ev.Complete {
			st.recvDone = true
			if !st.requester || st.kind == conn.RequestChannel {
				// our half may still be open
			} else {
				st.sendDone = true
			}
			c.maybeForget(st)
		}
	case conn.EventRequestN:
		if st := c.streams[ev.StreamID]; st != nil && st.parked != nil {
			r := st.parked
			st.parked = nil
			c.trySend(st, r)
		}
	case conn.EventCancel:
		st := c.streams[ev.StreamID]
		if st == nil {
			return false
		}
		st.sendDone = true
		if st.parked != nil {
			st.parked.done <- context.Canceled
			st.parked = nil
		}
		if !st.requester {
			st.recvDone = true
			st.fail(context.Canceled)
		}
		c.maybeForget(st)
	case conn.EventError:
		st := c.streams[ev.StreamID]
		if st == nil {
			return false
		}
		st.fail(&Error{Code: ev.Code, Message: ev.Message})
		delete(c.streams, st.id)
	case conn.EventMetadataPush:
		md := clone(ev.Metadata)
		c.goOneway(func() { _ = guard(func() error { c.opts.responder.MetadataPush(c.ctx, md); return nil }) })
	case conn.EventLease:
		w := c.leaseWait
		c.leaseWait = nil
		for _, f := range w {
			f()
		}
	case conn.EventClosed:
		c.err = ev.Err
		for _, f := range c.leaseWait {
			f()
		}
		c.leaseWait = nil
		return true
	}
	return false
}

func (c *Conn) maybeForget(st *stream) {
	if st.sendDone && st.recvDone {
		st.cancel()
		delete(c.streams, st.id)
	}
}

// grantLease sends a LEASE and renews it at half its TTL.
func (c *Conn) grantLease() {
	if err := c.m.SendLease(c.now(), c.opts.leaseTTL, c.opts.leaseN); err != nil {
		c.opts.log.Warn("rsocket: cannot send LEASE", "err", err)
		return
	}
	c.leaseT = time.AfterFunc(c.opts.leaseTTL/2, func() { c.post(c.grantLease) })
}

func (c *Conn) newStream(id uint32, kind conn.Interaction, requester bool, parent context.Context) *stream {
	st := &stream{id: id, kind: kind, requester: requester, sig: make(chan struct{}, 1)}
	st.ctx, st.cancel = context.WithCancel(parent)
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
	p := Payload{Metadata: clone(ev.Metadata), Data: clone(ev.Data)}
	h := c.opts.responder
	switch ev.Interaction {
	case conn.FireAndForget:
		c.goOneway(func() { _ = guard(func() error { h.FireAndForget(c.ctx, p); return nil }) })
	case conn.RequestResponse:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.ctx)
		go func() {
			var resp Payload
			err := guard(func() (err error) { resp, err = h.RequestResponse(st.ctx, p); return })
			c.post(func() {
				if c.streams[st.id] != st {
					return // cancelled meanwhile
				}
				if err != nil {
					code, msg := toError(err)
					_ = c.m.SendError(st.id, code, msg)
				} else {
					_ = c.m.SendPayload(st.id, resp.Metadata, resp.Data, true, true)
				}
				st.cancel()
				delete(c.streams, st.id)
			})
		}()
	case conn.RequestStream:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.ctx)
		sink := &Sink{c: c, st: st}
		go func() { sink.finish(guard(func() error { return h.RequestStream(st.ctx, p, sink) })) }()
	case conn.RequestChannel:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.ctx)
		in := &Stream{c: c, st: st, batch: c.opts.channelN}
		if ev.Complete {
			st.recvDone = true
			st.push(item{complete: true})
		} else if c.opts.channelN > 0 {
			_ = c.m.RequestN(st.id, c.opts.channelN)
			in.left = c.opts.channelN
		}
		sink := &Sink{c: c, st: st}
		go func() { sink.finish(guard(func() error { return h.RequestChannel(st.ctx, p, in, sink) })) }()
	}
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

// trySend sends r on st now, or parks it until credits arrive. Loop only.
func (c *Conn) trySend(st *stream, r *sendReq) {
	if c.streams[st.id] != st || st.sendDone {
		r.done <- fmt.Errorf("rsocket: stream %d is over: %w", st.id, context.Canceled)
		return
	}
	err := c.m.SendPayload(st.id, r.p.Metadata, r.p.Data, r.next, r.complete)
	if errors.Is(err, conn.ErrNoCredits) {
		st.parked = r
		return
	}
	if err == nil && r.complete {
		st.sendDone = true
		c.maybeForget(st)
	}
	r.done <- err
}

func (st *stream) push(it item) {
	st.mu.Lock()
	if !st.ended {
		st.q = append(st.q, it)
		if it.err != nil || it.complete {
			st.ended = true
		}
	}
	st.mu.Unlock()
	select {
	case st.sig <- struct{}{}:
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
}

// pop waits for the next item.
func (st *stream) pop(ctx context.Context) (item, error) {
	for {
		st.mu.Lock()
		if len(st.q) > 0 {
			it := st.q[0]
			st.q[0] = item{}
			st.q = st.q[1:]
			st.mu.Unlock()
			return it, nil
		}
		st.mu.Unlock()
		select {
		case <-st.sig:
		case <-ctx.Done():
			return item{}, ctx.Err()
		}
	}
}

// writer writes what the loop queued, coalescing everything queued while
// the previous write was in progress into one write.
type writer struct {
	tr      transport
	onErr   func(error)
	mu      sync.Mutex
	pending []byte
	closing bool
	sig     chan struct{}
	done    chan struct{} // closed once the transport is closed
}

func newWriter(tr transport, onErr func(error)) *writer {
	return &writer{tr: tr, onErr: onErr, sig: make(chan struct{}, 1), done: make(chan struct{})}
}

func (w *writer) enqueue(b []byte) {
	w.mu.Lock()
	w.pending = append(w.pending, b...)
	w.mu.Unlock()
	w.wake()
}

func (w *writer) wake() {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// finish makes the writer write what is queued, then close the transport.
// A peer that stops reading cannot hold the connection open: the transport
// is closed after 5 s regardless.
func (w *writer) finish() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.wake()
	time.AfterFunc(5*time.Second, func() { _ = w.tr.Close() })
}

func (w *writer) run() {
	var spare []byte
	failed := false
	for range w.sig {
		for {
			w.mu.Lock()
			buf := w.pending
			w.pending = spare[:0]
			closing := w.closing
			w.mu.Unlock()
			if len(buf) == 0 {
				spare = buf
				if closing {
					_ = w.tr.Close()
					close(w.done)
					return
				}
				break
			}
			if !failed {
				if err := w.tr.writeFrames(buf); err != nil {
					failed = true
					w.onErr(err)
				}
			}
			if cap(buf) > 4<<20 {
				buf = nil // do not keep a huge buffer after a big payload
			}
			spare = buf
		}
	}
}
