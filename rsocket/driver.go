package rsocket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
//
// There is no loop goroutine: mu guards the machine and the driver state,
// and whichever goroutine holds it (the reader with the frames it read, an
// application call, a handler's answer, the timer) runs the machine and
// dispatches its events. A request therefore costs no hop to another
// goroutine before its frame is encoded, and the reader takes every frame
// already buffered under one lock.
type Conn struct {
	opts  options
	m     *conn.Machine
	tr    transport
	start time.Time

	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc
	// vctx has ctx's values but never ends: the parent of handlers'
	// contexts, which the close cancels one by one (drain fails every
	// stream), so that a request does not register with (and contend
	// on) the connection's context.
	vctx context.Context

	done chan struct{} // closed when the connection is closed
	err  error         // why, valid after done

	mu     sync.Mutex
	closed bool // done is closed; the machine takes no more input

	// Commands from other goroutines. A goroutine that needs the machine
	// queues its command and runs the queue only if mu is free: under
	// load one holder runs everybody's commands in a batch instead of
	// every caller sleeping on mu in turn. Whoever releases mu runs
	// what was queued meanwhile (release), so no command is left behind.
	qmu  sync.Mutex
	ops  []op
	ops2 []op // the other buffer
	nops atomic.Int32

	// Guarded by mu.
	streams   map[uint32]*stream
	leaseWait []func()
	leaseT    *time.Timer
	setup     chan struct{} // closed on EventSetup (server) or Start (client)
	timer     *time.Timer   // runs tick at the machine's next deadline
	timerAt   time.Duration // when timer fires, if timerSet
	timerSet  bool

	// Output, guarded by mu. The writer goroutine writes everything
	// queued in one write (writing: it is in the middle of one), so that
	// under load many frames share one syscall. Nobody else waits on a
	// write: the reader must not block in a write to a peer that does not
	// read (both ends blocked writing would deadlock). It stops reading
	// only for the outbound budget (readOver), waiting without mu.
	out     []byte // frames not yet written
	spare   []byte // the last written buffer, for reuse
	writing bool
	// idleWait, when set, is closed by the end of the write in flight
	// (wrote): lockIdle waits on it.
	idleWait chan struct{}
	wclosing bool // close the transport once out is written
	wfailed  bool // a write failed: output is dropped
	wsig     chan struct{}
	wdone    chan struct{} // closed once the transport is closed

	slab []byte // see copy; under mu

	watches map[context.Context]*ctxWatch // under mu; see watch

	// Answers for RequestResponseFunc callers, queued under mu and run
	// after it is released (a callback may call into the connection), by
	// one goroutine at a time (calling), so a callback that sends the
	// next request does not recurse.
	cmu     sync.Mutex
	calls   []call
	calls2  []call
	calling atomic.Bool // written under cmu
	ncalls  atomic.Int32

	rsm *resumeConn // resumable connections only (resume.go); under mu

	// oneway bounds the fire-and-forget and metadata-push handlers running
	// at once: they keep no stream, so MaxStreams does not bound them, and
	// a flood must not become a flood of goroutines. When it is full, the
	// handlers of the frames the reader took meanwhile wait in onewayQ
	// (under mu; at most one batch, see readLoop), and the reader, after
	// releasing mu, starts them as slots free before it reads on: reading
	// stops and TCP pushes back on the peer. Nobody waits for a slot
	// while holding mu, since the running handlers may need it (a
	// handler that pushes metadata back would wait for the reader, which
	// waited for the handler: a connection wedged for good).
	oneway     chan struct{}
	onewayQ    []onewayJob
	onewayFull atomic.Bool // onewayQ is not empty

	// The outbound budget (WithOutboundBudget, WithServerOutboundBudget).
	// inflight is the size of the write in flight (takeOut to wrote),
	// counted the bytes of len(out)+inflight last published (account) to
	// qbytes and the server's total, under mu. While over budget
	// (overBudget) Send and answers wait (waitOutbound) on bwait, which
	// account closes when the queue shrinks.
	//
	// The reader stops on rq instead (readOver): the bytes from the
	// queue's front through the last byte the peer's frames caused (what
	// the reader emitted, answers, responder streams' elements; rmark:
	// some was added since the last mark). Our own requests and
	// requester sends do not stop it: two ends whose requests each fill
	// their queue would otherwise both stop reading the answers that
	// drain the other's, and wait for each other until a write timeout.
	inflight int
	counted  int64
	qbytes   atomic.Int64
	bwait    chan struct{}
	rq       int
	rmark    bool
	rqpub    int
	rqbytes  atomic.Int64
	rwait    atomic.Bool  // the reader waits (a test hook reads it)
	swait    atomic.Int32 // senders waiting

	// held is the bytes of the peer's requests handed to pooled
	// request-response, fire-and-forget and metadata-push handlers that
	// have not finished (hold, release): the reader stops on rq plus
	// held, and the server's total counts them too. Without it the reader
	// reads requests faster than slow handlers answer, and every waiting
	// handler holds its request (and then its answer) outside the budget.
	// Stream and channel handlers are not counted: they may wait for
	// REQUEST_N or payloads that only the reader delivers. heldSeen
	// (under mu) is held as account last saw it, to wake the reader when
	// it shrank.
	held     atomic.Int64
	heldSeen int64

	// The write-progress deadline (WithWriteTimeout): wtimer (made by the
	// writer under mu, then used by it alone and by writeWatch) fires
	// writeWatch, which closes the transport when the write in flight
	// (wbusy) made no progress since wprogAt for the timeout.
	wtimer   *time.Timer
	wbusy    atomic.Bool
	warmed   atomic.Bool  // wtimer is armed
	wprogAt  atomic.Int64 // c.now() of the last progress
	wstalled atomic.Bool  // writeWatch closed the transport (reset by swapTransport)

	budgetWaits atomic.Int32 // readers waiting for the server's budget before a large frame (readbudget.go)
}

// stream is the driver's side of one stream, either role.
type stream struct {
	id        uint32
	kind      conn.Interaction
	requester bool
	ctx       context.Context // responder only: the handler's
	cancel    func()          // responder: ends ctx; requester: stops watching the caller's ctx
	sendDone  bool
	recvDone  bool
	parked    *sendReq             // a Send waiting for credits
	fn        func(Payload, error) // requester of RequestResponseFunc: gets the answer instead of q
	pooled    bool                 // recycled once forgotten (funcStreams)
	wctx      context.Context      // requester of a request-response: the caller's context, watched (watch)

	hc  handlerCtx // responder: ctx
	c   *Conn      // responder of a request-response: for run
	req Payload    // its request, until run takes it

	mu    sync.Mutex
	q     []item
	q1    [1]item // q's first array: most streams (request-response) hold one item
	rq    []item  // what pop took from q and has not returned (rq[ri:]); pop's own
	ri    int
	cut   atomic.Bool // cancelled: rq is dropped as q was
	sig   chan struct{}
	ended bool // a terminal item was queued
}

type call struct {
	fn  func(Payload, error)
	p   Payload
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
		done:    make(chan struct{}),
		streams: map[uint32]*stream{}, setup: make(chan struct{}),
		wsig: make(chan struct{}, 1), wdone: make(chan struct{}),
		oneway: make(chan struct{}, maxOneway),
	}
	if o.responder == nil {
		c.opts.responder = UnimplementedResponder{}
	}
	if _, ok := c.opts.responder.(NonBlocking); ok {
		c.opts.inline = true
	}
	c.vctx = context.WithoutCancel(ctx)
	c.ctx, c.cancel = context.WithCancel(c.vctx)
	return c, nil
}

const maxOneway = 1024

// goOneway runs a fire-and-forget or metadata-push handler within the
// oneway bound, or queues it for the reader to start once a slot frees
// (startOneway). Under mu: it never waits.
// The request it handles is held (hold) until f returns, or until the
// connection closes with f still queued (dropOneway).
func (c *Conn) goOneway(f func(), req Payload) {
	j := onewayJob{run: f, held: heldSize(req)}
	c.hold(j.held)
	select {
	case c.oneway <- struct{}{}:
		c.runOneway(j)
	default:
		c.onewayQ = append(c.onewayQ, j)
		c.onewayFull.Store(true)
	}
}

// onewayJob is a oneway handler and the bytes of its request it holds.
type onewayJob struct {
	run  func()
	held int64
}

// dropOneway releases the handlers still queued when the connection
// closes; they never run. Under mu.
func (c *Conn) dropOneway() {
	for _, j := range c.onewayQ {
		c.releaseHeld(j.held)
	}
	c.onewayQ = nil
	c.onewayFull.Store(false)
}

// heldSize is what a request held by its handler counts (hold): its
// bytes, and a little for an empty one, so that a flood of empty requests
// to slow handlers is bounded too.
func heldSize(p Payload) int64 { return int64(len(p.Metadata)+len(p.Data)) + 64 }

// hold counts n bytes of a request handed to a handler (held). Under mu.
func (c *Conn) hold(n int64) {
	c.held.Add(n)
	if b := c.opts.sharedOut; b != nil {
		b.add(n)
	}
}

// releaseHeld ends hold(n) once the handler is done, from its goroutine. A
// reader waiting for room must see held shrink: account, run under mu
// by the command posted here, wakes it (the reader sets rwait before it
// checks readOver, so either it sees the new held or we see rwait).
func (c *Conn) releaseHeld(n int64) {
	c.held.Add(-n)
	if b := c.opts.sharedOut; b != nil {
		b.add(-n)
	}
	if c.rwait.Load() {
		c.post(noop)
	}
}

// runOneway runs j on a pooled goroutine in the slot its caller took.
func (c *Conn) runOneway(j onewayJob) {
	goWork(funcRunner(func() {
		defer func() { <-c.oneway }()
		defer c.releaseHeld(j.held)
		j.run()
	}))
}

// startOneway starts the queued oneway handlers, waiting for each slot
// without mu; the reader calls it before reading on. It returns false
// when the connection closed meanwhile (the queued handlers are dropped
// with it).
func (c *Conn) startOneway() bool {
	for c.onewayFull.Load() {
		select {
		case c.oneway <- struct{}{}:
		case <-c.done:
			return false
		}
		c.mu.Lock()
		var j onewayJob
		if len(c.onewayQ) > 0 {
			j = c.onewayQ[0]
			c.onewayQ[0] = onewayJob{}
			c.onewayQ = c.onewayQ[1:]
		}
		if len(c.onewayQ) == 0 {
			c.onewayQ = nil
			c.onewayFull.Store(false)
		}
		c.mu.Unlock()
		c.combine()
		if j.run == nil {
			<-c.oneway
			break
		}
		c.runOneway(j)
	}
	return true
}

// account publishes the queued output (len(out) plus the write in
// flight) to qbytes and the server's total, and wakes those waiting for
// room when it shrank. Under mu; it costs nothing when the queue is as
// it was last time (a request answered by a direct write).
func (c *Conn) account() {
	q := int64(len(c.out) + c.inflight)
	if c.rq > int(q) { // the queue was dropped (a failed write, a lost transport)
		c.rq = int(q)
	}
	if c.rq != c.rqpub {
		c.rqpub = c.rq
		c.rqbytes.Store(int64(c.rq))
	}
	if h := c.held.Load(); h != c.heldSeen {
		if h < c.heldSeen && c.bwait != nil {
			close(c.bwait)
			c.bwait = nil
		}
		c.heldSeen = h
	}
	if q == c.counted {
		return
	}
	if b := c.opts.sharedOut; b != nil {
		b.add(q - c.counted)
	}
	shrank := q < c.counted
	c.counted = q
	c.qbytes.Store(q)
	if shrank && c.bwait != nil {
		close(c.bwait)
		c.bwait = nil
	}
}

// markRead moves rq to the end of the queue if output the peer's frames
// caused was added (rmark). Under mu, right after a drain.
func (c *Conn) markRead() {
	if c.rmark {
		c.rq, c.rmark = len(c.out)+c.inflight, false
	}
}

// readOver is overBudget for the reader: on the queue through the last
// output the peer's frames caused (rq), not on our own requests, plus the
// requests its handlers hold (held).
func (c *Conn) readOver() bool {
	q := c.rqbytes.Load() + c.held.Load()
	if q > c.opts.outBudget {
		return true
	}
	b := c.opts.sharedOut
	return b != nil && q > 0 && b.total.Load() > b.limit
}

// overBudget reports whether the connection is over its outbound budget,
// or has output queued while its server is over the server's: then only
// connections with nothing queued read (one batch each), so the server's
// total stays within its budget plus one batch per connection.
func (c *Conn) overBudget() bool {
	q := c.qbytes.Load()
	if q > c.opts.outBudget {
		return true
	}
	b := c.opts.sharedOut
	return b != nil && q > 0 && b.total.Load() > b.limit
}

// waitOutbound waits, without mu, until the connection is within its
// budget; the reader passes its transport, others nil. It returns false
// if the connection closed (or, for the reader, tr was replaced).
//
// The queue shrinks only by writes, which need neither the reader nor
// the waiting senders: the writer takes mu only briefly, and mu is never
// held while waiting. A connection over budget has output queued, so a
// write is in flight or about to be, and it either progresses (account
// wakes us) or fails (the peer gone, or the write timeout): no wait is
// forever.
func (c *Conn) waitOutbound(tr transport) bool {
	if tr != nil {
		c.rwait.Store(true)
		defer c.rwait.Store(false)
	} else {
		c.swait.Add(1)
		defer c.swait.Add(-1)
	}
	for {
		c.mu.Lock()
		if c.closed || (tr != nil && c.tr != tr) {
			c.mu.Unlock()
			c.combine()
			return false
		}
		over := c.overBudget()
		if tr != nil {
			over = c.readOver()
		}
		if !over {
			c.mu.Unlock()
			c.combine()
			return true
		}
		if c.bwait == nil {
			c.bwait = make(chan struct{})
		}
		w := c.bwait
		c.mu.Unlock()
		c.combine()
		select {
		case <-w:
		case <-c.done:
		}
	}
}

func (c *Conn) now() time.Duration { return time.Since(c.start) }

// run starts the reader and the writer and sends what Start queued.
func (c *Conn) run() {
	go c.readLoop(c.tr)
	go c.writeLoop()
	c.mu.Lock()
	c.release()
}

// op is a queued command: fn, or a request-response on st (the hot path,
// without a closure).
type op struct {
	fn     func()
	st     *stream
	ctx    context.Context
	p      Payload
	err    error
	answer bool // st's handler answered p or err
}

// submit queues o and runs the queue if nobody holds mu.
func (c *Conn) submit(o op) {
	c.qmu.Lock()
	c.ops = append(c.ops, o)
	c.nops.Add(1)
	c.qmu.Unlock()
	if c.calling.Load() {
		// Callbacks are running (runCalls): it combines after them, so
		// the requests they send go out in one batch. (nops was raised
		// before calling is read and runCalls clears calling before it
		// reads nops: one of the two sees the other.)
		return
	}
	c.combine()
}

// combine runs the queued commands while there are some and mu is free.
// A holder that finds mu taken leaves: the one holding it runs them.
func (c *Conn) combine() {
	for c.nops.Load() > 0 && c.mu.TryLock() {
		c.unlock(false)
	}
}

// combineDirect is combine for the goroutine that may write directly (see
// unlock): the reader, and whoever runs a batch of callbacks.
func (c *Conn) combineDirect() {
	for c.nops.Load() > 0 && c.mu.TryLock() {
		c.unlock(true)
	}
}

// release is unlock, then runs what was queued while we held mu.
func (c *Conn) release() {
	c.unlock(false)
	c.combine()
}

// runOps runs the queued commands. Under mu.
func (c *Conn) runOps() {
	for c.nops.Load() > 0 {
		c.qmu.Lock()
		ops := c.ops
		c.ops, c.ops2 = c.ops2[:0], nil
		c.nops.Store(0)
		c.qmu.Unlock()
		for i := range ops {
			o := &ops[i]
			switch {
			case c.closed:
				if o.st != nil && !o.answer {
					o.st.fail(c.closedErr())
				}
			case o.answer:
				c.answer(o.st, o.p, o.err)
			case o.st != nil:
				c.openRR(o.ctx, o.st, o.p)
			default:
				o.fn()
			}
			if !c.closed {
				c.drain()
				c.markRead()
			}
			ops[i] = op{}
		}
		c.qmu.Lock()
		if c.ops2 == nil {
			c.ops2 = ops[:0]
		}
		c.qmu.Unlock()
	}
}

// unlock runs the queued commands, dispatches what the machine produced,
// arms the timer and releases mu. With direct, the writer goroutine idle
// and a plain socket, the output is written here: one attempt that never
// waits (the reader must not stop reading for a peer that does not read:
// both ends blocked writing would deadlock), so an answer costs no
// wake-up of the writer. What the socket does not take, and what was
// queued meanwhile, goes to the writer goroutine, which batches under
// load. Only the reader and a batch of callbacks write directly: they
// hold a whole batch of frames, while a goroutine per request writing
// its own frame would cost a syscall each (measured: 128 blocking
// callers lost 2.5× their rate that way).
func (c *Conn) unlock(direct bool) {
	c.applyRetainLimit()
	for {
		c.runOps()
		if !c.closed {
			c.drain()
			c.markRead()
		}
		if !c.closed {
			c.schedule()
		}
		if !direct || c.writing || c.wclosing || !c.pending() {
			break
		}
		raw := c.rawOut()
		if raw == nil {
			break
		}
		direct = false // once: more output goes to the writer
		buf := c.takeOut()
		c.mu.Unlock()
		n, err := raw.tryWrite(buf)
		c.mu.Lock()
		if err == nil && n < len(buf) {
			// The socket is full: the rest goes first, by the writer.
			rest := len(buf) - n + len(c.out)
			var b []byte
			if rest <= keepOut {
				b = make([]byte, 0, rest)
			}
			c.out = append(append(growOut(b, rest), buf[n:]...), c.out...)
		}
		c.rq = max(c.rq-n, 0)
		c.wrote(buf, err)
	}
	c.account()
	wake := (len(c.out) > 0 || c.wclosing) && !c.writing
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
	if c.ncalls.Load() > 0 {
		c.runCalls()
	}
}

// rawOut is the socket to write to directly, or nil. Under mu.
func (c *Conn) rawOut() *rawSock {
	if t, ok := c.tr.(*streamTransport); ok {
		return t.r.raw
	}
	return nil
}

// later queues fn's answer; the goroutine releasing mu runs it. Under mu.
func (c *Conn) later(fn func(Payload, error), it item) {
	c.cmu.Lock()
	c.calls = append(c.calls, call{fn: fn, p: it.p, err: it.err})
	c.ncalls.Add(1)
	c.cmu.Unlock()
}

// runCalls runs the queued callbacks unless another goroutine already
// does (it will run these too). Not under mu.
func (c *Conn) runCalls() {
	c.cmu.Lock()
	if c.calling.Load() {
		c.cmu.Unlock()
		return
	}
	c.calling.Store(true)
	for len(c.calls) > 0 {
		calls := c.calls
		c.calls, c.calls2 = c.calls2[:0], nil
		c.ncalls.Store(0)
		c.cmu.Unlock()
		for i := range calls {
			calls[i].fn(calls[i].p, calls[i].err)
			calls[i] = call{}
		}
		// The callbacks' requests were queued, not run (submit): send
		// them as one batch. Answers this queues (a closed connection's
		// failures) are ours to run: runCalls below us returns at once.
		c.combineDirect()
		c.cmu.Lock()
		if c.calls2 == nil {
			c.calls2 = calls[:0]
		}
	}
	c.calling.Store(false)
	c.cmu.Unlock()
	// Requests submitted after our last combine, while calling was set.
	c.combineDirect()
}

// pending reports whether output waits to be written; it is called
// right before takeOut. A journaled session (SessionJournal, resume.go) writes
// its journal record first: the journal before the socket. With the
// journal's store closed the server is stopping, and the output is
// dropped (the session lives on in the journal as it was). Under mu.
func (c *Conn) pending() bool {
	if len(c.out) == 0 || c.wfailed {
		return false
	}
	return c.rsm == nil || c.rsm.j == nil || c.journaled()
}

// journaled is pending's journal step. Under mu.
func (c *Conn) journaled() bool {
	if !c.persist() {
		c.out, c.wfailed = c.out[:0], true
		return false
	}
	return true
}

// takeOut hands the queued output to the writer. Under mu.
func (c *Conn) takeOut() []byte {
	buf := c.out
	c.out, c.spare = c.spare[:0], nil
	c.writing = true
	c.inflight = len(buf)
	return buf
}

// wrote ends a write. Under mu.
func (c *Conn) wrote(buf []byte, err error) {
	c.writing = false
	c.inflight = 0
	if c.idleWait != nil {
		close(c.idleWait)
		c.idleWait = nil
	}
	if cap(buf) <= keepOut { // a large one goes back to the pool: a connection keeps little
		c.spare = buf[:0]
	} else {
		frame.PutBuf(buf) // written: nothing refers to it
	}
	if err != nil && !c.wfailed {
		c.wfailed = true
		c.out = c.out[:0]
		if !c.closed {
			c.m.TransportClosed(err)
			c.drain()
		}
	}
}

func (c *Conn) wakeWriter() {
	select {
	case c.wsig <- struct{}{}:
	default:
	}
}

// writeLoop writes what was queued, every frame queued during the last
// write in the next one, and closes the transport at the end.
func (c *Conn) writeLoop() {
	for range c.wsig {
		for {
			// Let the goroutines that are ready to run (handlers with
			// answers, callers with requests) queue their frames first:
			// one write then carries them all. With nothing else to run
			// this returns at once.
			runtime.Gosched()
			c.mu.Lock()
			if c.writing {
				// A direct write (unlock) is under way: it wakes us if
				// anything is left when it is done.
				c.mu.Unlock()
				c.combine()
				break
			}
			if !c.pending() {
				c.out = c.out[:0]
				c.account()
				closing := c.wclosing
				c.mu.Unlock()
				c.combine()
				if closing {
					_ = c.tr.Close()
					if c.wtimer != nil {
						c.wtimer.Stop() // nothing more to watch
					}
					close(c.wdone)
					return
				}
				break
			}
			buf := c.takeOut()
			tr := c.tr
			if c.wtimer == nil && c.opts.writeTimeout > 0 {
				c.warmed.Store(true)
				c.wtimer = time.AfterFunc(c.opts.writeTimeout, c.writeWatch)
			}
			c.mu.Unlock()
			c.combine()
			err := c.writeOut(tr, buf)
			c.mu.Lock()
			if err == nil {
				c.rq = max(c.rq-len(buf), 0)
			}
			c.wrote(buf, err)
			c.account()
			c.mu.Unlock()
			c.combine()
		}
	}
}

// writeChunk is the most one write call carries, so that the write
// timeout measures progress, not the time a large batch takes.
const writeChunk = 256 << 10

// writeOut writes buf on tr for the writer goroutine, under the write
// timeout: writeWatch closes tr if no chunk completes for that long.
// (The direct writes of unlock never wait, so they need no deadline;
// what they leave comes here.) A write costs a clock read and a few
// atomic operations; the timer is armed only when it is not already
// (warmed), and disarms itself once it finds no write in flight.
func (c *Conn) writeOut(tr transport, buf []byte) error {
	if c.wtimer == nil {
		return tr.writeFrames(buf)
	}
	c.wprogAt.Store(int64(c.now()))
	c.wbusy.Store(true)
	if !c.warmed.Load() {
		c.warmed.Store(true)
		c.wtimer.Reset(c.opts.writeTimeout)
	}
	var err error
	_, stream := tr.(*streamTransport)
	for len(buf) > 0 && err == nil {
		n := min(len(buf), writeChunk) // a byte stream: any cut will do
		if !stream && n < len(buf) {   // messages: whole frames
			n = 0
			for n < len(buf) && n < writeChunk {
				_, rest, ok := conn.NextFrame(buf[n:])
				if !ok {
					n = len(buf) // writeFrames reports it
					break
				}
				n = len(buf) - len(rest)
			}
		}
		err = tr.writeFrames(buf[:n])
		if buf = buf[n:]; len(buf) > 0 {
			c.wprogAt.Store(int64(c.now()))
		}
	}
	c.wbusy.Store(false)
	if err != nil && c.wstalled.Load() {
		err = ErrWriteTimeout
	}
	return err
}

// writeWatch runs when a write may have stalled: with no progress for
// the write timeout it closes the transport, which fails the write
// (writeOut reports ErrWriteTimeout) and so the connection. With no write
// in flight it disarms (warmed false: the next write arms it again).
func (c *Conn) writeWatch() {
	c.mu.Lock()
	d := c.opts.writeTimeout
	if !c.wbusy.Load() {
		c.warmed.Store(false)
		if !c.wbusy.Load() { // else a write began and saw warmed still set: watch it
			c.mu.Unlock()
			c.combine()
			return
		}
		c.warmed.Store(true)
	}
	if idle := c.now() - time.Duration(c.wprogAt.Load()); idle < d {
		c.wtimer.Reset(d - idle)
		c.mu.Unlock()
		c.combine()
		return
	}
	c.wstalled.Store(true)
	tr := c.tr
	c.mu.Unlock()
	c.combine()
	c.opts.log.Info("rsocket: peer accepted no output for the write timeout, closing", "timeout", d)
	go func() { _ = abort(tr) }()
}

// schedule arms the timer for the machine's next deadline. A timer that
// fires early is harmless (tick re-arms it), so it is only moved earlier.
// Under mu.
func (c *Conn) schedule() {
	t, ok := c.m.NextDeadline()
	if !ok || (c.timerSet && t >= c.timerAt) {
		return
	}
	c.timerAt, c.timerSet = t, true
	d := max(t-c.now(), 0)
	if c.timer == nil {
		c.timer = time.AfterFunc(d, c.tick)
	} else {
		c.timer.Reset(d)
	}
}

func (c *Conn) tick() {
	c.mu.Lock()
	c.timerSet = false
	if c.closed {
		c.mu.Unlock()
		c.combine()
		return
	}
	c.m.Tick(c.now())
	c.release()
}

func (c *Conn) readLoop(tr transport) {
	var buf []byte
	st, _ := tr.(*streamTransport)
	// The frame being read counts against the server's budget and its
	// buffer is pooled (readbudget.go); this reader's own, since a
	// resumed session's new reader may start before the old one ends.
	rb := &readBudget{c: c}
	setReadBudget(tr, rb)
	defer rb.done()
	for {
		f, err := tr.readFrame(buf)
		c.mu.Lock()
		// tr was replaced by a resumed transport, or is lost and waits
		// to be (resume.go): what it still delivers is not for the
		// session. A WebSocket being closed under its reader can hand
		// over an empty message, which the machine would take for a
		// malformed frame and end the session for.
		if c.closed || c.tr != tr || (c.rsm != nil && c.rsm.down) {
			c.mu.Unlock()
			c.combine()
			return
		}
		if err != nil {
			if c.wstalled.Load() {
				err = ErrWriteTimeout // writeWatch closed the transport under us
			}
			c.m.TransportClosed(err)
			c.release()
			return
		}
		q0 := len(c.out) + c.inflight
		now := c.now()
		c.m.Receive(now, f)
		// Frames already buffered are taken under the same lock: one
		// lock, one dispatch and one write for a burst of requests. The
		// machine copied what its events keep, so buf is reused at once.
		for n := 0; n < 256 && st != nil && whole(st); n++ {
			if !c.closed {
				c.drain()
			}
			if f, err = st.readFrame(f); err != nil || c.closed {
				break // the next readFrame returns the error again
			}
			c.m.Receive(now, f)
		}
		if !c.closed {
			c.drain()
			if len(c.out)+c.inflight > q0 { // the frames' own output (echoes, inline answers, errors)
				c.rmark = true
				c.markRead()
			}
		}
		rb.release() // before unlock publishes the frames' output
		c.unlock(true)
		c.combineDirect()
		// Processed: the machine and the handlers' copies keep nothing of
		// a large frame's pooled buffer, which goes back (its output and
		// held requests count instead).
		rb.done()
		// Back-pressure, without mu: handlers waiting for a oneway
		// slot, or output the peer caused over the budget (readOver),
		// stop reading until they are through. Why that bounds the
		// output a peer that never reads can cause:
		//  - KEEPALIVE echoes, inline answers, errors: emitted here, by
		//    the batch above, so at most one batch beyond the budget.
		//  - pooled request-response answers: one per request read; the
		//    handler waits for room before it queues its answer
		//    (stream.run), so only answers racing that check pass it.
		//  - stream and channel elements: credits do not bound them (a
		//    peer may grant 2^31-1), so Send waits for room too.
		//  - oneway handlers: no answer; their own calls back into the
		//    connection are bounded by the pool (1,024) plus one batch.
		// The writer needs neither the reader nor the waiting senders.
		if c.onewayFull.Load() && !c.startOneway() {
			return
		}
		if c.readOver() && !c.waitOutbound(tr) {
			return
		}
		buf = f[:0]
		if cap(buf) > largeRead { // a pooled frame buffer, given back by rb.done
			buf = nil
		}
	}
}

// whole reports whether a whole frame is buffered, so reading it does not
// block.
func whole(t *streamTransport) bool { return t.r.buffered() }

// frameReader reads length-prefixed frames from a byte stream. It holds a
// large buffer only while data flows: before blocking on an empty buffer
// it returns the large one to a shared pool and waits with a small one,
// so an idle connection keeps a few hundred bytes instead of 64 KiB.
//
// On a plain socket (raw) the reader knows when a read is about to wait:
// it then returns the large buffer and waits with the small one, and
// takes a large one again when data came. Without that knowledge it
// guesses from the size of the last read, and a guess that was wrong
// costs a second read for one burst of frames.
type frameReader struct {
	c     io.Reader
	raw   *rawSock // nil: not a plain socket
	buf   []byte   // small[:] or a pooled large buffer
	r, w  int      // buf[r:w] is read and not yet returned
	large *[]byte
	last  int // bytes the last Read returned
	small [smallRead]byte
	stall stallDeadline // deadlines.go: set while a frame is partial
	// budget reserves frames larger than largeRead against the server's
	// budget and lends their buffers (readbudget.go); nil (a resumable
	// listener's first frame): plain allocations.
	budget *readBudget
}

const (
	smallRead = 512
	largeRead = 64 << 10
	// hugeStep is what a frame larger than largeRead gets at first (see
	// readHuge).
	hugeStep = 1 << 20
)

var largeBufs = sync.Pool{New: func() any { b := make([]byte, largeRead); return &b }}

func newFrameReader(c io.Reader) *frameReader {
	f := &frameReader{c: c, raw: newRawSock(c)}
	f.buf = f.small[:]
	if f.raw != nil {
		f.raw.onWait, f.raw.onWake = f.lend, f.borrow
	}
	return f
}

// lend returns the large buffer to the pool while the read waits for the
// peer (buf[:w] is what is pending; r is 0 during a read).
func (f *frameReader) lend() {
	if f.large == nil || f.w > smallRead {
		return
	}
	copy(f.small[:], f.buf[:f.w])
	largeBufs.Put(f.large)
	f.large, f.buf = nil, f.small[:]
	f.raw.rbuf = f.buf[f.w:]
}

// borrow takes a large buffer once data came after a wait: a burst is
// read in one syscall instead of filling the small buffer first.
func (f *frameReader) borrow() {
	if f.large != nil {
		return
	}
	f.large = largeBufs.Get().(*[]byte)
	f.buf = (*f.large)[:cap(*f.large)]
	copy(f.buf, f.small[:f.w])
	f.raw.rbuf = f.buf[f.w:]
}

// buffered reports whether a whole frame is buffered.
func (f *frameReader) buffered() bool {
	if f.w-f.r < frame.LengthPrefixSize {
		return false
	}
	b := f.buf[f.r:]
	return f.w-f.r >= frame.LengthPrefixSize+(int(b[0])<<16|int(b[1])<<8|int(b[2]))
}

// readFrame returns the next frame without its prefix. It aliases the
// reader's buffer (or dst, for a frame larger than the buffer) and is
// valid until the next call.
func (f *frameReader) readFrame(dst []byte) ([]byte, error) {
	for {
		if f.w-f.r >= frame.LengthPrefixSize {
			b := f.buf[f.r:f.w]
			n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
			end := frame.LengthPrefixSize + n
			if len(b) >= end {
				f.r += end
				return b[frame.LengthPrefixSize:end:end], nil
			}
			if end > largeRead {
				return f.readHuge(dst, n)
			}
		}
		if f.r == f.w {
			f.r, f.w = 0, 0
			// About to wait for the peer after a short read: the traffic
			// is light, hold only the small buffer. After a long read
			// keep the large one: the next read is likely long too.
			if f.raw == nil && f.large != nil && f.last < smallRead {
				largeBufs.Put(f.large)
				f.large, f.buf = nil, f.small[:]
			}
		} else if f.r > 0 {
			f.w = copy(f.buf, f.buf[f.r:f.w])
			f.r = 0
		}
		if f.w == len(f.buf) && f.large == nil { // data flows: take a large buffer
			f.large = largeBufs.Get().(*[]byte)
			f.buf = (*f.large)[:copy(*f.large, f.buf[:f.w])]
			f.buf = f.buf[:cap(f.buf)]
		}
		f.stall.arm(f.w > 0) // r is 0 here: buf[:w] is a partial frame
		var n int
		var err error
		if f.raw != nil {
			n, err = f.raw.read(f.buf[f.w:])
		} else {
			n, err = f.c.Read(f.buf[f.w:])
		}
		f.w += n
		f.last = n
		if err != nil && n == 0 {
			if err == io.EOF && f.w > f.r {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// readHuge reads a frame of n bytes that does not fit the large buffer:
// what is buffered, then the rest straight from the connection. Memory
// follows the bytes that arrive, not the length the prefix claims: a peer
// that declares 16 MiB frames and sends nothing more would otherwise cost
// 16 MiB per connection (the agent's HTTP ingest had the same flaw with
// Content-Length). So a dst too small starts at hugeStep and doubles.
//
// With a budget, each buffer is pooled and reserved against the server's
// budget before it is read into: the reader waits, reading nothing, until
// it fits (the stall deadline is off meanwhile: the wait is ours, not the
// peer's). A frame up to twice hugeStep is taken whole at once: growing
// it would copy it and take two buffers.
func (f *frameReader) readHuge(dst []byte, n int) ([]byte, error) {
	have := f.buf[f.r+frame.LengthPrefixSize : f.w]
	first := min(n, hugeStep)
	if n <= 2*hugeStep {
		first = n
	}
	grow := func(b []byte, size int) ([]byte, error) {
		if f.budget == nil {
			return slices.Grow(b, size-len(b)), nil
		}
		f.stall.arm(false)
		b, ok := f.budget.grow(b, size)
		if !ok {
			return nil, errReadBudgetClosed
		}
		return b, nil
	}
	var err error
	if f.budget != nil || cap(dst) < n {
		if dst, err = grow(dst[:0], max(len(have), first)); err != nil {
			return nil, err
		}
	}
	dst = append(dst[:0], have...)
	f.r, f.w = 0, 0
	for len(dst) < n {
		if len(dst) == cap(dst) {
			if dst, err = grow(dst, min(n, 2*cap(dst))); err != nil {
				return nil, err
			}
		}
		f.stall.arm(true)
		k, err := f.c.Read(dst[len(dst):min(cap(dst), n)])
		dst = dst[:len(dst)+k]
		if err != nil && len(dst) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return dst, nil
}

// post runs fn with the machine; dropped after close.
func (c *Conn) post(fn func()) { c.submit(op{fn: fn}) }

// do runs fn with the machine and returns its error.
func (c *Conn) do(fn func() error) error {
	res := make(chan error, 1)
	c.submit(op{fn: func() { res <- fn() }})
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

// drain moves the machine's output to c.out and dispatches its events,
// and tears the connection down once the machine closed. Under mu.
func (c *Conn) drain() {
	closed := false
	var later []conn.Event
	for {
		rd := c.m.Ready()
		if len(rd.Out) == 0 && len(rd.Events) == 0 && len(later) == 0 {
			break
		}
		nOut, nEv := len(rd.Out), len(rd.Events)
		if !c.wfailed {
			c.out = append(growOut(c.out, len(rd.Out)), rd.Out...)
		}
		for i := range rd.Events {
			if c.event(&rd.Events[i]) {
				closed = true
			}
		}
		// Commands the handlers issued appended to the machine's output
		// and events, which Advance would drop: keep them (deep copies,
		// since Advance also releases the arena) before advancing.
		rd = c.m.Ready()
		if !c.wfailed {
			c.out = append(growOut(c.out, len(rd.Out)-nOut), rd.Out[nOut:]...)
		}
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
		c.closed = true
		// The writer writes what is queued, then closes the transport. A
		// peer that stops reading cannot hold the connection open: the
		// transport is closed after 5 s regardless.
		c.wclosing = true
		c.wakeWriter()
		time.AfterFunc(5*time.Second, func() { _ = c.tr.Close() })
		c.cancel()
		c.dropOneway()
		for id, st := range c.streams {
			st.fail(c.closedErr())
			delete(c.streams, id)
		}
		if c.leaseT != nil {
			c.leaseT.Stop()
		}
		if c.timer != nil {
			c.timer.Stop()
		}
		for ctx, w := range c.watches {
			w.stop()
			delete(c.watches, ctx)
		}
		close(c.done)
	}
}

func noop() {}

// keepOut is the largest output buffer a connection keeps for reuse
// (spare); larger ones are pooled (growOut). It was 1 MiB, without the
// pool: 100 connections that each once answered 1 MiB kept 100 MiB no
// budget saw.
const keepOut = frame.MinPooledBuf

// growOut makes room for n more bytes in the output queue b, as append
// would, but for more than keepOut at once in a pooled frame buffer
// (frame.GetBuf), which wrote gives back when it is written: a flood of
// large answers otherwise leaves a fresh buffer per write to the
// collector. The old b goes back to the pool: nothing else refers to the
// queue.
func growOut(b []byte, n int) []byte {
	// Only for large output at once: a queue growing by small frames
	// grows as append does, its old arrays left to the collector (in the
	// pool they would stay reachable until two collections passed).
	if cap(b)-len(b) >= n || len(b)+n <= keepOut || n <= keepOut {
		return b
	}
	nb := append(frame.GetBuf(max(len(b)+n, cap(b)+cap(b)/4)), b...)
	frame.PutBuf(b)
	return nb
}

// copy copies inbound bytes for the application. Small ones are carved
// from a shared slab: one allocation per many payloads instead of one
// each (the slab is freed when the last payload cut from it is). Slabs
// start small and double, so a connection that saw a few requests does
// not hold 8 KiB. Under mu.
func (c *Conn) copy(b []byte) []byte {
	const maxSlab, small = 8 << 10, 512
	if b == nil || len(b) > small {
		return clone(b)
	}
	if cap(c.slab)-len(c.slab) < len(b) {
		c.slab = make([]byte, 0, min(max(2*cap(c.slab), small/2), maxSlab))
	}
	at := len(c.slab)
	c.slab = append(c.slab, b...)
	return c.slab[at:len(c.slab):len(c.slab)]
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
		// A SETUP with L to a server without lease never gets here: the
		// machine refuses it with UNSUPPORTED_SETUP (conn.Config.Lease).
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
		st.push(item{p: Payload{Metadata: c.copy(ev.Metadata), Data: c.copy(ev.Data)}, next: ev.Next, complete: ev.Complete})
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
		c.goOneway(func() { _ = guard(func() error { c.opts.responder.MetadataPush(c.ctx, md); return nil }) }, Payload{Metadata: md})
	case conn.EventLease:
		w := c.leaseWait
		c.leaseWait = nil
		for _, f := range w {
			f()
		}
	case conn.EventReconnect:
		c.transportLost(ev.Err)
	case conn.EventResumed:
		c.resumed()
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
	st.kind, st.requester, st.cancel, st.c, st.fn, st.pooled = conn.RequestResponse, true, noop, c, fn, true
	return st
}

// ctxWatch watches one caller context for every request-response of the
// connection made with it: one context.AfterFunc per connection and
// context instead of one per request (which costs allocations and, worse,
// a lock on the caller's context shared by every connection using it).
type ctxWatch struct {
	n    int // live streams made with the context
	stop func() bool
}

// maxIdleWatches bounds the watches kept with no stream, for contexts
// that are reused but never end.
const maxIdleWatches = 8

// watch makes the end of ctx cancel st (CANCEL to the peer, ctx's error to
// the caller). Under mu.
func (c *Conn) watch(ctx context.Context, st *stream) {
	if reflect.TypeOf(ctx).Kind() != reflect.Pointer {
		// A context type that may not hash as a map key (a struct with
		// a slice would panic): a watch of its own, as before, and the
		// stream is not recycled since the watch refers to it.
		stop := context.AfterFunc(ctx, func() { c.post(func() { c.cancelStream(st, ctx.Err()) }) })
		st.cancel, st.pooled = func() { stop() }, false
		return
	}
	w := c.watches[ctx]
	if w == nil {
		if c.watches == nil {
			c.watches = map[context.Context]*ctxWatch{}
		}
		w = &ctxWatch{}
		w.stop = context.AfterFunc(ctx, func() { c.post(func() { c.ctxDone(ctx) }) })
		c.watches[ctx] = w
	}
	w.n++
	st.wctx, st.c = ctx, c
}

// unwatch ends st's watch, if any. Under mu.
func (c *Conn) unwatch(st *stream) {
	if st.wctx == nil {
		return
	}
	ctx := st.wctx
	st.wctx = nil
	w := c.watches[ctx]
	if w == nil {
		return
	}
	if w.n--; w.n == 0 && len(c.watches) > maxIdleWatches {
		w.stop()
		delete(c.watches, ctx)
	}
}

// ctxDone cancels the streams made with ctx, which ended. Under mu.
func (c *Conn) ctxDone(ctx context.Context) {
	if c.watches[ctx] == nil {
		return
	}
	for _, st := range c.streams {
		if st.wctx == ctx {
			c.cancelStream(st, ctx.Err())
		}
	}
	delete(c.watches, ctx)
}

// grantLease sends a LEASE and renews it at half its TTL.
func (c *Conn) grantLease() {
	if c.leaseT != nil {
		c.leaseT.Stop() // one renewal chain, also when a resume restarts it
	}
	if err := c.m.SendLease(c.now(), c.opts.leaseTTL, c.opts.leaseN); err != nil {
		if !errors.Is(err, conn.ErrNotReady) { // transport down: resumed() grants anew
			c.opts.log.Warn("rsocket: cannot send LEASE", "err", err)
		}
		return
	}
	c.leaseT = time.AfterFunc(c.opts.leaseTTL/2, func() { c.post(c.grantLease) })
}

func (c *Conn) newStream(id uint32, kind conn.Interaction, requester bool, parent context.Context) *stream {
	st := &stream{id: id, kind: kind, requester: requester, cancel: noop}
	st.q = st.q1[:0]
	if requester || kind == conn.RequestChannel {
		st.sig = make(chan struct{}, 1) // only these are read with pop
	}
	if !requester {
		st.hc.parent = parent
		st.ctx, st.cancel = &st.hc, st.hc.cancel
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
			_ = c.m.SendError(ev.StreamID, code, msg)
		} else {
			_ = c.m.SendPayload(ev.StreamID, resp.Metadata, resp.Data, true, true)
		}
		return
	}
	p := Payload{Metadata: c.copy(ev.Metadata), Data: c.copy(ev.Data)}
	switch ev.Interaction {
	case conn.FireAndForget:
		c.goOneway(func() { _ = guard(func() error { h.FireAndForget(c.ctx, p); return nil }) }, p)
	case conn.RequestResponse:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.vctx)
		st.c, st.req = c, p
		c.hold(heldSize(p))
		goWork(st) // runs respond
	case conn.RequestStream:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.vctx)
		sink := &Sink{c: c, st: st}
		goWork(funcRunner(func() { sink.finish(guard(func() error { return h.RequestStream(st.ctx, p, sink) })) }))
	case conn.RequestChannel:
		st := c.newStream(ev.StreamID, ev.Interaction, false, c.vctx)
		in := &Stream{c: c, st: st, batch: c.opts.channelN}
		if ev.Complete {
			st.recvDone = true
			st.push(item{complete: true})
		} else if c.opts.channelN > 0 {
			_ = c.m.RequestN(st.id, c.opts.channelN)
			in.left = c.opts.channelN
		}
		sink := &Sink{c: c, st: st}
		goWork(funcRunner(func() { sink.finish(guard(func() error { return h.RequestChannel(st.ctx, p, in, sink) })) }))
	}
}

// run answers a request-response on a pooled goroutine (see goWork): the
// stream carries what a closure would, so a request costs no closure.
func (st *stream) run() {
	c, p := st.c, st.req
	st.req = Payload{}
	n := heldSize(p)
	var resp Payload
	err := guard(func() (err error) { resp, err = c.opts.responder.RequestResponse(st.ctx, p); return })
	if c.overBudget() {
		c.waitOutbound(nil) // the answer waits for room (closed: runOps drops it)
	}
	c.submit(op{st: st, p: resp, err: err, answer: true})
	// Held until its answer is queued, where rq counts it: a handler
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
		_ = c.m.SendError(st.id, code, msg)
	} else {
		_ = c.m.SendPayload(st.id, resp.Metadata, resp.Data, true, true)
	}
	c.rmark = true // output the peer's request caused
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
	err := c.m.SendPayload(st.id, r.p.Metadata, r.p.Data, r.next, r.complete)
	if errors.Is(err, conn.ErrNoCredits) {
		st.parked = r
		return
	}
	if err == nil && !st.requester {
		c.rmark = true // a responder's element: the peer's request caused it
	}
	if err == nil && r.complete {
		st.sendDone = true
		c.maybeForget(st)
	}
	r.done <- err
}

func (st *stream) push(it item) {
	st.mu.Lock()
	if st.fn != nil {
		// RequestResponseFunc: the first item (answer or error) is the
		// only one; it goes to the callback.
		ended := st.ended
		st.ended = true
		st.mu.Unlock()
		if !ended {
			st.c.later(st.fn, it)
		}
		return
	}
	if !st.ended {
		st.q = append(st.q, it)
		if it.err != nil || it.complete {
			st.ended = true
		}
	}
	st.mu.Unlock()
	st.wake()
}

// wake signals pop; streams nobody pops have no sig.
func (st *stream) wake() {
	if st.sig == nil {
		return
	}
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
	if st.wctx != nil {
		st.c.unwatch(st)
	}
}

// pop waits for the next item. It takes everything queued at once into
// rq, its own buffer, and serves from there without the lock: the reader
// pushing and the consumer popping then meet on mu once per batch, not
// per item, and the two buffers are reused in turn instead of growing.
func (st *stream) pop(ctx context.Context) (item, error) {
	for {
		if st.ri < len(st.rq) {
			if !st.cut.Load() {
				it := st.rq[st.ri]
				st.rq[st.ri] = item{}
				st.ri++
				return it, nil
			}
			clear(st.rq[st.ri:]) // cancelled: what was taken is dropped too
			st.ri = len(st.rq)
		}
		st.mu.Lock()
		if len(st.q) > 0 {
			st.rq, st.q = st.q, st.rq[:0]
			st.ri = 0
			st.mu.Unlock()
			continue
		}
		st.mu.Unlock()
		select {
		case <-st.sig:
		case <-ctx.Done():
			return item{}, ctx.Err()
		}
	}
}

// Handlers run on pooled goroutines: a new goroutine per request costs
// its creation and, since answering runs the machine, growing its stack
// each time; a pooled one keeps its stack. idleWorkers bounds how many
// wait for work (the rest exit), so a burst does not leave thousands.
var (
	work        = make(chan runner)
	idleWorkers atomic.Int32
)

// runner is work for the pool: a func, or a stream to answer (no closure).
type runner interface{ run() }

type funcRunner func()

func (f funcRunner) run() { f() }

const maxIdleWorkers = 512

// goWork runs f on an idle pooled goroutine, or a new one.
func goWork(f runner) {
	select {
	case work <- f:
	default:
		go worker(f)
	}
}

func worker(f runner) {
	for {
		f.run()
		if idleWorkers.Add(1) > maxIdleWorkers {
			idleWorkers.Add(-1)
			return
		}
		f = <-work
		idleWorkers.Add(-1)
	}
}

// handlerCtx is a responder's context, part of its stream: it ends when
// the stream does or the connection closes (drain fails every stream).
// Done's channel is made only when asked for (most request-response
// handlers never ask), and nothing registers with the connection's
// context: a request costs no context allocations.
type handlerCtx struct {
	parent context.Context // values only; it never ends
	mu     sync.Mutex
	done   chan struct{}
	err    error
}

func (h *handlerCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (h *handlerCtx) Value(key any) any           { return h.parent.Value(key) }

func (h *handlerCtx) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		h.done = make(chan struct{})
		if h.err != nil {
			close(h.done)
		}
	}
	return h.done
}

func (h *handlerCtx) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *handlerCtx) cancel() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = context.Canceled
		if h.done != nil {
			close(h.done)
		}
	}
}
