package rsocket

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// The connection: the Conn type with its fields grouped by concern, its
// making (newConn) and start (run), the machine's timer (schedule, tick),
// and drain, which moves the machine's output to the write queue,
// dispatches its events (event) and tears the connection down once the
// machine closed. Conn.mu guards the machine and every field marked
// "under mu"; whoever holds it runs the machine (ops.go says how commands
// from other goroutines get to it). The other files hold one concern each:
// ops.go the command queue, write.go the writer, read.go the reader,
// budget.go the outbound accounting, streams.go the streams, ctxwatch.go
// the callers' contexts, workers.go the handler goroutines, handlerctx.go
// the handlers' contexts.

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
	opts      options
	machine   *conn.Machine
	transport transport
	start     time.Time

	ctx    context.Context // ends when the connection closes
	cancel context.CancelFunc
	// handlerParent has ctx's values but never ends: the parent of handlers'
	// contexts, which the close cancels one by one (drain fails every
	// stream), so that a request does not register with (and contend
	// on) the connection's context.
	handlerParent context.Context

	done chan struct{} // closed when the connection is closed
	err  error         // why, valid after done

	mu     sync.Mutex
	closed bool // done is closed; the machine takes no more input

	// Commands from other goroutines. A goroutine that needs the machine
	// queues its command and runs the queue only if mu is free: under
	// load one holder runs everybody's commands in a batch instead of
	// every caller sleeping on mu in turn. Whoever releases mu runs
	// what was queued meanwhile (release), so no command is left behind
	// (ops.go).
	opsMu     sync.Mutex
	ops       []op
	opsSpare  []op // the other buffer
	opsQueued atomic.Int32

	// Guarded by mu.
	streams    map[uint32]*stream
	leaseWait  []func()
	leaseTimer *time.Timer
	setup      chan struct{} // closed on EventSetup (server) or Start (client)
	timer      *time.Timer   // runs tick at the machine's next deadline
	timerAt    time.Duration // when timer fires, if timerSet
	timerSet   bool

	// Output, guarded by mu. The writer goroutine writes everything
	// queued in one write (writing: it is in the middle of one), so that
	// under load many frames share one syscall. Nobody else waits on a
	// write: the reader must not block in a write to a peer that does not
	// read (both ends blocked writing would deadlock). It stops reading
	// only for the outbound budget (readOver), waiting without mu
	// (write.go).
	out []byte // frames not yet written, after those in outFront
	// outFront holds whole buffers queued before out, in order: a large
	// payload's frames join the queue as the pooled buffer the machine
	// encoded them into (queueLarge), not copied into out behind what
	// waits there, and a lent payload's data (Sink.SendLent) as the
	// caller's own slice after its frame's head. outFrontLen is their
	// bytes; frontSpare is the list the last write used, for reuse.
	outFront    []outPiece
	outFrontLen int
	frontSpare  []outPiece
	// lentWritten holds, in order, the callbacks of the data the machine
	// lent in its output (conn.Ready.Lent) that drain has not queued yet:
	// trySend appends, drain takes them from lentHead on.
	lentWritten []func()
	lentHead    int
	lentCount   uint64   // payloads lent so far (PayloadsLent)
	smallSpares [][]byte // written heads of lent payloads, for reuse (recycleOut)
	// vec and vecBatch are writeVec's lists of pieces, reused: the writer
	// goroutine's alone.
	vec      [][]byte
	vecBatch [][]byte
	vecWrite net.Buffers
	spare    []byte // the last written buffer, for reuse
	writing  bool
	// idleWait, when set, is closed by the end of the write in flight
	// (wrote): lockIdle waits on it.
	idleWait        chan struct{}
	closeAfterWrite bool          // close the transport once out is written
	writeFailed     bool          // a write failed: output is dropped
	writerWake      chan struct{} // wakes writeLoop: output was queued
	writerDone      chan struct{} // closed once the transport is closed

	inboundSlab []byte // see copyInbound; under mu
	// reading is the frame the reader is dispatching (streamPayload may
	// hand its pooled buffer to the application); zero otherwise. Under
	// mu.
	reading readingFrame

	watches map[context.Context]*ctxWatch // under mu; see watch

	// Answers for RequestResponseFunc callers, queued under mu and run
	// after it is released (a callback may call into the connection), by
	// one goroutine at a time (callsRunning), so a callback that sends the
	// next request does not recurse (ops.go).
	callsMu      sync.Mutex
	calls        []call
	callsSpare   []call
	callsRunning atomic.Bool // written under callsMu
	callsQueued  atomic.Int32

	resumable *resumeConn // resumable connections only (resume.go); under mu

	// oneway bounds the fire-and-forget and metadata-push handlers running
	// at once: they keep no stream, so MaxStreams does not bound them, and
	// a flood must not become a flood of goroutines. When it is full, the
	// handlers of the frames the reader took meanwhile wait in onewayQueue
	// (under mu; at most one batch, see readLoop), and the reader, after
	// releasing mu, starts them as slots free before it reads on: reading
	// stops and TCP pushes back on the peer. Nobody waits for a slot
	// while holding mu, since the running handlers may need it (a
	// handler that pushes metadata back would wait for the reader, which
	// waited for the handler: a connection wedged for good). See
	// workers.go.
	oneway      chan struct{}
	onewayQueue []onewayJob
	onewayFull  atomic.Bool // onewayQueue is not empty

	// The outbound budget (WithOutboundBudget, WithServerOutboundBudget;
	// budget.go).
	// inflight is the size of the write in flight (takeOut to wrote) and
	// inflightMem the memory its buffer holds; queuedBytes is the bytes of
	// the queue and the write in flight, counted their memory (queueMemory)
	// last published to the server's total (account), under mu. While over budget
	// (overBudget) Send and answers wait (waitOutbound) on roomWait, which
	// account closes when the queue shrinks.
	//
	// The reader stops on peerOut instead (readOver): the bytes from the
	// queue's front through the last byte the peer's frames caused (what
	// the reader emitted, answers, responder streams' elements; peerOutAdded:
	// some was added since the last mark). Our own requests and
	// requester sends do not stop it: two ends whose requests each fill
	// their queue would otherwise both stop reading the answers that
	// drain the other's, and wait for each other until a write timeout.
	inflight         int
	inflightMem      int
	counted          int64
	queuedBytes      atomic.Int64
	roomWait         chan struct{}
	peerOut          int
	peerOutAdded     bool
	peerOutPublished int          // peerOut as last stored in peerOutBytes (account)
	peerOutBytes     atomic.Int64 // peerOut, for readOver without mu
	readerWaiting    atomic.Bool  // the reader waits (a test hook reads it)
	sendersWaiting   atomic.Int32 // senders waiting

	// held is the bytes of the peer's requests handed to pooled
	// request-response, fire-and-forget and metadata-push handlers that
	// have not finished (hold, release): the reader stops on peerOut plus
	// held, and the server's total counts them too. Without it the reader
	// reads requests faster than slow handlers answer, and every waiting
	// handler holds its request (and then its answer) outside the budget.
	// Stream and channel handlers are not counted: they may wait for
	// REQUEST_N or payloads that only the reader delivers. heldSeen
	// (under mu) is held as account last saw it, to wake the reader when
	// it shrank.
	held     atomic.Int64
	heldSeen int64

	// The write-progress deadline (WithWriteTimeout): writeTimer (made by the
	// writer under mu, then used by it alone and by writeWatch) fires
	// writeWatch, which closes the transport when the write in flight
	// (writeBusy) made no progress since writeProgressAt for the timeout.
	writeTimer      *time.Timer
	writeBusy       atomic.Bool
	writeTimerArmed atomic.Bool      // writeTimer is armed
	writeProgressAt atomic.Int64     // c.now() of the last progress
	writeStalled    atomic.Bool      // writeWatch closed the transport (reset by swapTransport)
	notRSocket      *NotRSocketError // the peer did not speak RSocket (foreign.go): its streams' errors wrap it

	budgetWaits atomic.Int32 // readers waiting for the server's budget before a large frame (readbudget.go)
}

func newConn(ctx context.Context, tr transport, o options) (*Conn, error) {
	now := time.Duration(0)
	m, err := conn.New(o.cfg, now)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		opts: o, machine: m, transport: tr, start: time.Now(),
		done:    make(chan struct{}),
		streams: map[uint32]*stream{}, setup: make(chan struct{}),
		writerWake: make(chan struct{}, 1), writerDone: make(chan struct{}),
		oneway: make(chan struct{}, maxOneway),
	}
	if o.responder == nil {
		c.opts.responder = UnimplementedResponder{}
	}
	if _, ok := c.opts.responder.(NonBlocking); ok {
		c.opts.inline = true
	}
	c.handlerParent = context.WithoutCancel(ctx)
	c.ctx, c.cancel = context.WithCancel(c.handlerParent)
	return c, nil
}

func (c *Conn) now() time.Duration { return time.Since(c.start) }

// run starts the reader and the writer and sends what Start queued.
func (c *Conn) run() {
	go c.readLoop(c.transport)
	go c.writeLoop()
	c.mu.Lock()
	c.release()
}

// schedule arms the timer for the machine's next deadline. A timer that
// fires early is harmless (tick re-arms it), so it is only moved earlier.
// Under mu.
func (c *Conn) schedule() {
	t, ok := c.machine.NextDeadline()
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
	c.machine.Tick(c.now())
	c.release()
}

func (c *Conn) closedErr() error {
	if nr, ok := c.err.(*NotRSocketError); ok {
		return fmt.Errorf("%w: %w", ErrClosed, nr) // errors.As finds it, as in the streams' errors
	}
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
		rd := c.machine.Ready()
		if len(rd.Out) == 0 && len(rd.Events) == 0 && len(later) == 0 {
			break
		}
		nOut, nEv, nLent := len(rd.Out), len(rd.Events), len(rd.Lent)
		switch {
		case len(rd.Lent) > 0:
			c.queueLent(rd.Out, 0, rd.Lent)
		case !c.writeFailed && c.queueLarge(rd.Out):
			nOut = 0 // the machine queues what the handlers send in a new buffer
		case !c.writeFailed:
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
		rd = c.machine.Ready()
		if len(rd.Lent) > nLent {
			c.queueLent(rd.Out, nOut, rd.Lent[nLent:])
		} else if !c.writeFailed {
			c.out = append(growOut(c.out, len(rd.Out)-nOut), rd.Out[nOut:]...)
		}
		later = later[:0]
		for _, ev := range rd.Events[nEv:] {
			ev.Metadata, ev.Data = clone(ev.Metadata), clone(ev.Data)
			later = append(later, ev)
		}
		c.machine.Advance()
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
		c.closeAfterWrite = true
		c.wakeWriter()
		time.AfterFunc(5*time.Second, func() { _ = c.transport.Close() })
		c.cancel()
		c.dropOneway()
		for id, st := range c.streams {
			st.fail(c.closedErr())
			delete(c.streams, id)
		}
		if c.leaseTimer != nil {
			c.leaseTimer.Stop()
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

// queueLarge queues the machine's output buffer as it is instead of
// copying it into the queue, when it is a large pooled buffer (a large
// payload's frames): an upload's chunk is then copied once on the way
// out, into its frame, whether or not the queue is empty. What waits in
// the queue goes before it (outFront); an empty small queue buffer
// becomes the spare, as a written one does (wrote). It reports whether it
// took the buffer. Under mu.
func (c *Conn) queueLarge(out []byte) bool {
	if cap(out) <= keepOut {
		return false
	}
	switch {
	case len(c.out) > 0:
		c.outFront = append(c.outFront, outPiece{b: c.out})
		c.outFrontLen += len(c.out)
	case cap(c.out) > keepOut:
		frame.PutBuf(c.out)
	case c.spare == nil && c.out != nil:
		c.spare = c.out[:0]
	}
	c.out = c.machine.TakeOut()
	return true
}

// queueLent queues the machine's output out[from:], in which the data of
// lent goes at each one's At: the bytes before it are closed as a buffer
// of their own in outFront, and the data follows as the caller's slice,
// with its callback (lentWritten), which the writer calls once it is
// written (wrote) or dropped (dropOut). A failed connection drops it all
// at once. Under mu.
func (c *Conn) queueLent(out []byte, from int, lent []conn.Lent) {
	for _, l := range lent {
		written := c.lentWritten[c.lentHead]
		c.lentWritten[c.lentHead] = nil
		c.lentHead++
		if c.writeFailed {
			written()
			continue
		}
		c.out = append(growOut(c.out, l.At-from), out[from:l.At]...)
		c.outFront = append(c.outFront, outPiece{b: c.out}, outPiece{b: l.Data, written: written})
		c.outFrontLen += len(c.out) + len(l.Data)
		c.out = c.nextOut()
		from = l.At
	}
	if c.lentHead == len(c.lentWritten) {
		c.lentWritten, c.lentHead = c.lentWritten[:0], 0
	}
	if !c.writeFailed {
		c.out = append(growOut(c.out, len(out)-from), out[from:]...)
	}
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
		st.push(item{p: c.streamPayload(st, ev), next: ev.Next, complete: ev.Complete})
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
		e := &Error{Code: ev.Code, Message: ev.Message}
		if ev.Local && c.notRSocket != nil {
			e.cause = c.notRSocket
		}
		st.fail(e)
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

// grantLease sends a LEASE and renews it at half its TTL.
func (c *Conn) grantLease() {
	if c.leaseTimer != nil {
		c.leaseTimer.Stop() // one renewal chain, also when a resume restarts it
	}
	if err := c.machine.SendLease(c.now(), c.opts.leaseTTL, c.opts.leaseN); err != nil {
		if !errors.Is(err, conn.ErrNotReady) { // transport down: resumed() grants anew
			c.opts.log.Warn("rsocket: cannot send LEASE", "err", err)
		}
		return
	}
	c.leaseTimer = time.AfterFunc(c.opts.leaseTTL/2, func() { c.post(c.grantLease) })
}

// inboundPayload is the payload of a request or PAYLOAD event for the
// application to keep: the event's own bytes when the machine allocated
// them for it alone (a reassembled payload, ev.Owned), else a copy, since
// the event's bytes are the read buffer's (conn.Config.LendFrames) and the
// reader reuses it for the next frame. Under mu.
func (c *Conn) inboundPayload(ev *conn.Event) Payload {
	if ev.Owned {
		return Payload{Metadata: ev.Metadata, Data: ev.Data}
	}
	return Payload{Metadata: c.copyInbound(ev.Metadata), Data: c.copyInbound(ev.Data)}
}

// streamPayload is inboundPayload for a PAYLOAD of st: when st's
// application gives its payloads back (Stream.Release), large data is
// not copied at all when its frame was read into a pooled buffer of its
// own (a frame over 64 KiB, readHuge): the application gets that buffer,
// and Release gives it back to the pool. Otherwise the data is copied
// into a buffer the stream was given back (or one of the frame pool)
// rather than fresh memory. Such a buffer is warm in the cache and needs no collection: the copy of an
// upload's 128 KiB chunk into fresh memory was half of an RSocket
// upload's memmove, plus the clearing of new pages, at one 128 KiB
// allocation per chunk (docs/xfer.md, "Where an upload's CPU goes").
// Under mu.
func (c *Conn) streamPayload(st *stream, ev *conn.Event) Payload {
	if ev.Owned || len(ev.Data) < minRecycled || !st.recycles.Load() {
		return c.inboundPayload(ev)
	}
	if buf := c.reading.bufferOf(ev.Data); st.lend(buf, len(c.reading.f), c.maxLent()) {
		c.reading.rb.buf = nil // the application's until Release: the reader neither reuses nor pools it
		return Payload{Metadata: c.copyInbound(ev.Metadata), Data: ev.Data}
	}
	b := st.spare(len(ev.Data))
	if b == nil {
		// The frame pool's, which Release fills when the stream's spares
		// are full: memory another stream or connection gave back.
		b = frame.GetBuf(len(ev.Data))[:len(ev.Data)]
	}
	copy(b, ev.Data)
	return Payload{Metadata: c.copyInbound(ev.Metadata), Data: b}
}

// Stream.Release keeps the buffers of payloads of minRecycled bytes and
// more (the slab's small copies must never be reused) for the stream's
// next payloads. The sender sends in bursts: with byte credits, the
// receiver grants half its window again at once (usedBytes), and that
// half arrives while the application works through the queue, so a
// stream keeps up to half the window of spares (at least minSpareBytes),
// memory its queue held at its peak anyway (measured: with 1 MiB of
// spares, four in ten of an upload's 256 KiB chunks found none).
const (
	minRecycled   = 32 << 10
	minSpareBytes = 1 << 20
)

// maxLent bounds the frame buffers a stream's application holds
// (Stream.Release gives them back): twice the byte-credit window (at
// least 2 MiB), so that a queue the window filled still gets its frames'
// buffers. Beyond it payloads are copied again, so an application that
// forgets to release does not pin frame buffers without bound.
func (c *Conn) maxLent() int { return max(2*minSpareBytes, 2*int(c.opts.cfg.ByteCredits)) }

// readingFrame is the frame the reader dispatches and its reservation,
// whose pooled buffer holds it when the frame was larger than the
// reader's own buffer.
type readingFrame struct {
	rb *readBudget
	f  []byte
}

// bufferOf is the pooled buffer of the frame being read when data is the
// frame's tail (a PAYLOAD's data comes last) and the frame starts that
// buffer; nil when data is elsewhere (a frame in the reader's shared
// buffer, a copy). Under mu.
func (r readingFrame) bufferOf(data []byte) []byte {
	if r.rb == nil || r.rb.buf == nil || len(data) == 0 || len(r.f) == 0 {
		return nil
	}
	buf := r.rb.buf[:1]
	if &buf[0] != &r.f[0] || &r.f[len(r.f)-1] != &data[len(data)-1] {
		return nil
	}
	return buf[:0]
}

// maxSpares is how many bytes of released buffers a stream keeps.
func (c *Conn) maxSpares() int {
	return max(minSpareBytes, int(c.opts.cfg.ByteCredits/2))
}

// copyInbound copies inbound bytes for the application. Small ones are carved
// from a shared slab: one allocation per many payloads instead of one
// each (the slab is freed when the last payload cut from it is). Slabs
// start small and double, so a connection that saw a few requests does
// not hold 8 KiB. Under mu.
func (c *Conn) copyInbound(b []byte) []byte {
	const maxSlab, small = 8 << 10, 512
	if b == nil || len(b) > small {
		return clone(b)
	}
	if cap(c.inboundSlab)-len(c.inboundSlab) < len(b) {
		c.inboundSlab = make([]byte, 0, min(max(2*cap(c.inboundSlab), small/2), maxSlab))
	}
	at := len(c.inboundSlab)
	c.inboundSlab = append(c.inboundSlab, b...)
	return c.inboundSlab[at:len(c.inboundSlab):len(c.inboundSlab)]
}

// clone copies b into a slice of its own. Written as make then copy,
// which the compiler turns into one allocation that is not cleared first
// (append to a make of capacity n clears all n bytes, then copies over
// them: 4 % of an upload's CPU at 256 KiB chunks, in the profile).
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}
