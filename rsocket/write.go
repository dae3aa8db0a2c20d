package rsocket

import (
	"runtime"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// The writer: output is queued in Conn.out under mu (drain) and written by
// the writer goroutine (writeLoop), which takes everything queued in one
// write (takeOut, wrote), so that under load many frames share a syscall.
// Nobody else waits on a write: the reader must not block writing to a
// peer that does not read, or two such ends would deadlock. writeOut
// writes in chunks under the write timeout, and writeWatch closes a
// transport whose write made no progress for that long. A journaled
// session writes its journal record before the socket (pending).

// pending reports whether output waits to be written; it is called
// right before takeOut. A journaled session (SessionJournal, resume.go) writes
// its journal record first: the journal before the socket. With the
// journal's store closed the server is stopping, and the output is
// dropped (the session lives on in the journal as it was). Under mu.
func (c *Conn) pending() bool {
	if c.queued() == 0 || c.writeFailed {
		return false
	}
	return c.resumable == nil || c.resumable.j == nil || c.journaled()
}

// journaled is pending's journal step. Under mu.
func (c *Conn) journaled() bool {
	if !c.persist() {
		c.dropOut()
		c.writeFailed = true
		return false
	}
	return true
}

// queued is the bytes the output queue holds. Under mu.
func (c *Conn) queued() int { return c.outFrontLen + len(c.out) }

// dropOut empties the output queue; its large buffers go back to the
// pool (a connection keeps little). Under mu.
func (c *Conn) dropOut() {
	for _, p := range c.outFront {
		p.done()
	}
	clear(c.outFront)
	c.outFront, c.outFrontLen = c.outFront[:0], 0
	if cap(c.out) > keepOut {
		frame.PutBuf(c.out)
		c.out = nil
	}
	c.out = c.out[:0]
}

// takeOut hands the queued output to the writer: the whole buffers of
// outFront, to be written first, and buf. Under mu.
func (c *Conn) takeOut() (front []outPiece, buf []byte) {
	front, buf = c.outFront, c.out
	c.outFront, c.outFrontLen, c.frontSpare = c.frontSpare[:0], 0, nil
	c.out, c.spare = c.spare[:0], nil
	c.writing = true
	c.inflight, c.inflightMem = len(buf), bufMemory(buf)
	for _, p := range front {
		c.inflight += len(p.b)
		c.inflightMem += p.memory()
	}
	return front, buf
}

// outPiece is a buffer of outFront: one of the connection's (a pooled
// one goes back to the pool once written), or, with written set, a lent
// payload's data, the caller's memory, which is only told it is free.
type outPiece struct {
	b       []byte
	written func()
}

// memory is what the piece holds for the budget (bufMemory): lent data
// counts its bytes, not the capacity of the caller's slice.
func (p outPiece) memory() int {
	if p.written != nil {
		return len(p.b)
	}
	return bufMemory(p.b)
}

// done gives a piece that was written or dropped back: a lent one to its
// caller, a large buffer to the pool.
func (p outPiece) done() {
	if p.written != nil {
		p.written()
		return
	}
	frame.PutBuf(p.b)
}

// wrote ends a write. Under mu.
func (c *Conn) wrote(front []outPiece, buf []byte, err error) {
	c.writing = false
	c.inflight, c.inflightMem = 0, 0
	if c.idleWait != nil {
		close(c.idleWait)
		c.idleWait = nil
	}
	for _, p := range front {
		if p.written != nil {
			p.written()
		} else {
			c.recycleOut(p.b)
		}
	}
	clear(front)
	c.frontSpare = front[:0]
	c.recycleOut(buf)
	if err != nil && !c.writeFailed {
		c.writeFailed = true
		c.dropOut()
		if !c.closed {
			c.machine.TransportClosed(err)
			c.drain()
		}
	}
}

// recycleOut takes back a written output buffer: a small one as the
// spare, a large one to the pool (a connection keeps little). Nothing
// refers to it any more. Under mu.
func (c *Conn) recycleOut(b []byte) {
	switch {
	case cap(b) > keepOut:
		frame.PutBuf(b)
	case c.spare == nil:
		c.spare = b[:0]
	case cap(b) <= smallOut && len(c.smallSpares) < maxSmallSpares:
		// A lent payload's frame head (queueLent): one per payload
		// queued, so more than one spare is needed between two writes.
		c.smallSpares = append(c.smallSpares, b[:0])
	}
}

// smallOut is the largest buffer kept in smallSpares, maxSmallSpares how
// many: the heads of lent payloads queued between two writes (at 64 KiB
// each, 128 of them fill the 8 MiB window xfer grants).
const (
	smallOut       = 512
	maxSmallSpares = 128
)

// nextOut is a buffer for the output queue after queueLent closed one:
// the spare, or a small one kept for it, or nil (append allocates). Under mu.
func (c *Conn) nextOut() []byte {
	if c.spare != nil {
		b := c.spare
		c.spare = nil
		return b
	}
	if n := len(c.smallSpares); n > 0 {
		b := c.smallSpares[n-1]
		c.smallSpares = c.smallSpares[:n-1]
		return b
	}
	return nil
}

func (c *Conn) wakeWriter() {
	select {
	case c.writerWake <- struct{}{}:
	default:
	}
}

// writeLoop writes what was queued, every frame queued during the last
// write in the next one, and closes the transport at the end.
func (c *Conn) writeLoop() {
	for range c.writerWake {
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
				c.dropOut() // dropped output (a failed write)
				c.account()
				closing := c.closeAfterWrite
				c.mu.Unlock()
				c.combine()
				if closing {
					_ = c.transport.Close()
					if c.writeTimer != nil {
						c.writeTimer.Stop() // nothing more to watch
					}
					close(c.writerDone)
					return
				}
				break
			}
			front, buf := c.takeOut()
			n := c.inflight
			tr := c.transport
			if c.writeTimer == nil && c.opts.writeTimeout > 0 {
				c.writeTimerArmed.Store(true)
				c.writeTimer = time.AfterFunc(c.opts.writeTimeout, c.writeWatch)
			}
			c.mu.Unlock()
			c.combine()
			err := c.writeQueued(tr, front, buf)
			c.mu.Lock()
			if err == nil {
				c.peerOut = max(c.peerOut-n, 0)
			}
			c.wrote(front, buf, err)
			c.account()
			c.mu.Unlock()
			c.combine()
		}
	}
}

// writeQueued writes what takeOut took: the whole buffers of front, in
// order, then buf. Each holds whole frames.
func (c *Conn) writeQueued(tr transport, front []outPiece, buf []byte) error {
	if st, ok := tr.(*streamTransport); ok && len(front) > 0 {
		return c.writeVec(st, front, buf)
	}
	for _, p := range front {
		if err := c.writeOut(tr, p.b); err != nil {
			return err
		}
	}
	if len(buf) == 0 {
		return nil
	}
	return c.writeOut(tr, buf)
}

// writeChunk is the most one write call carries, so that the write
// timeout measures progress, not the time a large batch takes.
const writeChunk = 256 << 10

// writeOut writes buf on tr for the writer goroutine, under the write
// timeout: writeWatch closes tr if no chunk completes for that long.
// (The direct writes of unlock never wait, so they need no deadline;
// what they leave comes here.) A write costs a clock read and a few
// atomic operations; the timer is armed only when it is not already
// (writeTimerArmed), and disarms itself once it finds no write in flight.
func (c *Conn) writeOut(tr transport, buf []byte) error {
	if c.writeTimer == nil {
		return tr.writeFrames(buf)
	}
	c.writeBegin()
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
			c.writeProgressAt.Store(int64(c.now()))
		}
	}
	return c.writeEnd(err)
}

// writeBegin starts a write watched by the write timeout (writeOut).
func (c *Conn) writeBegin() {
	c.writeProgressAt.Store(int64(c.now()))
	c.writeBusy.Store(true)
	if !c.writeTimerArmed.Load() {
		c.writeTimerArmed.Store(true)
		c.writeTimer.Reset(c.opts.writeTimeout)
	}
}

// writeEnd ends a write that writeBegin started: a failure after a stall
// is the write timeout.
func (c *Conn) writeEnd(err error) error {
	c.writeBusy.Store(false)
	if err != nil && c.writeStalled.Load() {
		err = ErrWriteTimeout
	}
	return err
}

// writeVec writes the pieces of front, then buf, on a byte stream in
// writev calls of at most writeChunk bytes each (net.Buffers): a lent
// payload's frame head and its data go out in one call, as they would
// from one buffer, without the data being copied into one first. Under
// the write timeout as writeOut. For the writer goroutine only (c.vec).
func (c *Conn) writeVec(st *streamTransport, front []outPiece, buf []byte) error {
	all := c.vec[:0]
	for _, p := range front {
		if len(p.b) > 0 {
			all = append(all, p.b)
		}
	}
	if len(buf) > 0 {
		all = append(all, buf)
	}
	c.vec = all
	vec := all
	watched := c.writeTimer != nil
	if watched {
		c.writeBegin()
	}
	var err error
	for len(vec) > 0 && err == nil {
		batch, n := c.vecBatch[:0], 0
		for len(vec) > 0 && n < writeChunk {
			b := vec[0]
			if k := writeChunk - n; len(b) > k {
				b, vec[0] = b[:k], b[k:] // a byte stream: any cut will do
			} else {
				vec = vec[1:]
			}
			batch = append(batch, b)
			n += len(b)
		}
		c.vecBatch = batch
		c.vecWrite = batch
		_, err = c.vecWrite.WriteTo(st.c) // consumes c.vecWrite, not batch
		if watched && len(vec) > 0 {
			c.writeProgressAt.Store(int64(c.now()))
		}
	}
	// No reference to written pieces stays: lent data is the caller's again.
	clear(all)
	clear(c.vecBatch[:cap(c.vecBatch)])
	c.vec, c.vecWrite = all[:0], nil
	if !watched {
		return err
	}
	return c.writeEnd(err)
}

// writeWatch runs when a write may have stalled: with no progress for
// the write timeout it closes the transport, which fails the write
// (writeOut reports ErrWriteTimeout) and so the connection. With no write
// in flight it disarms (writeTimerArmed false: the next write arms it again).
func (c *Conn) writeWatch() {
	c.mu.Lock()
	d := c.opts.writeTimeout
	if !c.writeBusy.Load() {
		c.writeTimerArmed.Store(false)
		if !c.writeBusy.Load() { // else a write began and saw writeTimerArmed still set: watch it
			c.mu.Unlock()
			c.combine()
			return
		}
		c.writeTimerArmed.Store(true)
	}
	if idle := c.now() - time.Duration(c.writeProgressAt.Load()); idle < d {
		c.writeTimer.Reset(d - idle)
		c.mu.Unlock()
		c.combine()
		return
	}
	c.writeStalled.Store(true)
	tr := c.transport
	c.mu.Unlock()
	c.combine()
	c.opts.log.Info("rsocket: peer accepted no output for the write timeout, closing", "timeout", d)
	go func() { _ = abort(tr) }()
}

// keepOut is the largest output buffer a connection keeps for reuse
// (spare); larger ones are pooled (growOut). It was 1 MiB, without the
// pool: 100 connections that each once answered 1 MiB kept 100 MiB no
// budget saw.
const keepOut = frame.MinPooledBuf

// bufMemory is what the output buffer b holds in memory, as the
// server's budget counts it: a large buffer's whole capacity (its unused
// tail is memory no one else can use until it is written), a small one's
// bytes (a connection keeps one of those anyway).
func bufMemory(b []byte) int {
	if cap(b) > keepOut {
		return cap(b)
	}
	return len(b)
}

// growOut makes room for n more bytes in the output queue b, as append
// would, but past keepOut in a pooled frame buffer (frame.GetBuf), which
// wrote gives back when it is written: a flood of large answers otherwise
// leaves a fresh buffer per write to the collector. So does a queue that
// grows past keepOut by small frames (a stream of 16 KiB payloads: it
// grew by append from the spare at every write, and the arrays append
// made, of no pool size, went to the collector: six times the bytes sent,
// TestOutputQueueGrowsInPooledBuffers). It doubles, as append does. The
// old b goes back to the pool when it came from there (PutBuf drops
// other sizes): nothing else refers to the queue.
func growOut(b []byte, n int) []byte {
	if cap(b)-len(b) >= n || len(b)+n <= keepOut {
		return b
	}
	nb := append(frame.GetBuf(max(len(b)+n, 2*cap(b))), b...)
	frame.PutBuf(b)
	return nb
}
