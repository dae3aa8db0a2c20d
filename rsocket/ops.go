package rsocket

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// The command queue: how goroutines other than mu's holder get the
// machine run for them. A command is queued under opsMu (submit, post, do)
// and run by whoever holds mu (runOps, from unlock); a goroutine finding mu
// taken leaves its command to the holder (combine), so under load one
// goroutine runs a batch of everybody's commands instead of each sleeping
// on mu. unlock also writes directly to a plain socket when the writer is
// idle. Answers to RequestResponseFunc callers are queued likewise under
// callsMu (queueCallback) and run after mu is released (runCalls), one
// goroutine at a time (callsRunning), since a callback may call back in.

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
	c.opsMu.Lock()
	c.ops = append(c.ops, o)
	c.opsQueued.Add(1)
	c.opsMu.Unlock()
	if c.callsRunning.Load() {
		// Callbacks are running (runCalls): it combines after them, so
		// the requests they send go out in one batch. (opsQueued was raised
		// before callsRunning is read and runCalls clears callsRunning before it
		// reads opsQueued: one of the two sees the other.)
		return
	}
	c.combine()
}

// combine runs the queued commands while there are some and mu is free.
// A holder that finds mu taken leaves: the one holding it runs them.
func (c *Conn) combine() {
	for c.opsQueued.Load() > 0 && c.mu.TryLock() {
		c.unlock(false)
	}
}

// combineDirect is combine for the goroutine that may write directly (see
// unlock): the reader, and whoever runs a batch of callbacks.
func (c *Conn) combineDirect() {
	for c.opsQueued.Load() > 0 && c.mu.TryLock() {
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
	for c.opsQueued.Load() > 0 {
		c.opsMu.Lock()
		ops := c.ops
		c.ops, c.opsSpare = c.opsSpare[:0], nil
		c.opsQueued.Store(0)
		c.opsMu.Unlock()
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
		c.opsMu.Lock()
		if c.opsSpare == nil {
			c.opsSpare = ops[:0]
		}
		c.opsMu.Unlock()
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
		// Whole buffers queued in front (queueLarge) are the writer's.
		if !direct || c.writing || c.closeAfterWrite || len(c.outFront) > 0 || !c.pending() {
			break
		}
		raw := c.rawOut()
		if raw == nil {
			break
		}
		direct = false        // once: more output goes to the writer
		_, buf := c.takeOut() // outFront is empty
		c.mu.Unlock()
		var n int
		var err error
		if c.opts.directWrite != nil {
			n, err = c.opts.directWrite(raw, buf)
		} else {
			n, err = raw.tryWrite(buf)
		}
		c.mu.Lock()
		if err == nil && n < len(buf) {
			c.requeueTail(buf[n:])
		}
		c.peerOut = max(c.peerOut-n, 0)
		c.wrote(nil, buf, err)
	}
	c.account()
	wake := (c.queued() > 0 || c.closeAfterWrite) && !c.writing
	c.mu.Unlock()
	if wake {
		c.wakeWriter()
	}
	if c.callsQueued.Load() > 0 {
		c.runCalls()
	}
}

// requeueTail queues what a direct write left unwritten (the socket was
// full) to go first, by the writer: before everything queued while the
// write ran, in outFront as well as out. The tail ends inside a frame
// whose head is on the wire, so any other byte written before it would
// cut that frame in two. Before this, the tail went to the front of out
// only, and a large frame queued meanwhile (queueLarge) had moved what
// out held by then to outFront, which the writer writes first: the peer
// read a frame's head, then other frames, then its tail (a resumed
// session under a write timeout, TestWriteTimeoutResumes, once saw a
// zero "length" inside a payload). Under mu.
func (c *Conn) requeueTail(tail []byte) {
	if len(c.outFront) > 0 {
		c.outFront = slices.Insert(c.outFront, 0, outPiece{b: append(newOutBuf(len(tail)), tail...)})
		c.outFrontLen += len(tail)
		return
	}
	old := c.out
	c.out = append(append(newOutBuf(len(tail)+len(old)), tail...), old...)
	if cap(old) > keepOut {
		frame.PutBuf(old) // copied: nothing refers to it
	}
}

// newOutBuf is an empty output queue buffer for n bytes: a pooled one
// past keepOut (wrote gives it back), else one of exactly n.
func newOutBuf(n int) []byte {
	if n > keepOut {
		return frame.GetBuf(n)
	}
	return make([]byte, 0, n)
}

// rawOut is the socket to write to directly, or nil. Under mu.
func (c *Conn) rawOut() *rawSock {
	if t, ok := c.transport.(*streamTransport); ok {
		return t.r.raw
	}
	return nil
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

type call struct {
	fn  func(Payload, error)
	p   Payload
	err error
}

// queueCallback queues fn's answer; the goroutine releasing mu runs it. Under mu.
func (c *Conn) queueCallback(fn func(Payload, error), it item) {
	c.callsMu.Lock()
	c.calls = append(c.calls, call{fn: fn, p: it.p, err: it.err})
	c.callsQueued.Add(1)
	c.callsMu.Unlock()
}

// runCalls runs the queued callbacks unless another goroutine already
// does (it will run these too). Not under mu.
func (c *Conn) runCalls() {
	c.callsMu.Lock()
	if c.callsRunning.Load() {
		c.callsMu.Unlock()
		return
	}
	c.callsRunning.Store(true)
	for len(c.calls) > 0 {
		calls := c.calls
		c.calls, c.callsSpare = c.callsSpare[:0], nil
		c.callsQueued.Store(0)
		c.callsMu.Unlock()
		for i := range calls {
			calls[i].fn(calls[i].p, calls[i].err)
			calls[i] = call{}
		}
		// The callbacks' requests were queued, not run (submit): send
		// them as one batch. Answers this queues (a closed connection's
		// failures) are ours to run: runCalls below us returns at once.
		c.combineDirect()
		c.callsMu.Lock()
		if c.callsSpare == nil {
			c.callsSpare = calls[:0]
		}
	}
	c.callsRunning.Store(false)
	c.callsMu.Unlock()
	// Requests submitted after our last combine, while callsRunning was set.
	c.combineDirect()
}
