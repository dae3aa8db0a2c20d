package rsocket

import (
	"errors"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// The frame being read counts against the server's budget (issue 22).
// Without this each connection read one large frame beyond the budget
// before the reader's check after the frame stopped it: 100 connections
// flooding 1 MiB frames held 100 MiB no budget saw, and every frame was a
// fresh allocation the collector's headroom doubled.
//
// So a frame larger than the floor (largeRead, 64 KiB: a connection may
// always read that much, into the buffer it has anyway) is reserved
// against the server's total before its body is read into a buffer: a
// reader waits, without reading, until the total plus the frame fits the
// server's budget. The peer's bytes stay in the kernel and TCP pushes
// back on it. Its buffer comes from a pool by size class (frame.GetBuf) and
// goes back once the frame is processed: the machine lends its bytes to
// the events (conn.Config.LendFrames), which the driver dispatches before
// that, copying what the application keeps (Conn.inboundPayload), so
// nothing aliases it then.
//
// Deadlock: memory follows the bytes that arrive (a 16 MiB length prefix
// followed by silence costs 1 MiB, not 16), so a frame's reservation may
// grow while it is read, and readers holding part of a frame each, all
// waiting for more, could wait for each other for ever. One reader at a
// time may therefore overdraw: a reader in the middle of a frame that
// finds no room takes the server's overdraw slot if it is free and reads
// its frame to the end regardless; the others wait for room or the slot.
// Its peer either sends (the frame ends, the slot frees) or stalls (the
// frame stall timeout closes it). The server's total thus stays within
// its budget plus one frame (the overdraw, at most 16 MiB) plus the
// floor of each connection. A frame larger than the whole budget is read
// through the slot too, else it would wait for ever.

// errReadBudgetClosed ends a read that was waiting for room when its
// connection closed.
var errReadBudgetClosed = errors.New("rsocket: connection closed while its next frame waited for the server's budget")

// readBudget is one reader's (readLoop's, one per transport) reservation
// for the frame it is reading and that frame's pooled buffer.
type readBudget struct {
	c        *Conn
	reserved int64  // bytes counted in the server's total for this frame
	buf      []byte // the frame's pooled buffer (frame.GetBuf); nil: none
	overdraw bool   // this reader holds the server's overdraw slot
}

// setReadBudget gives tr's reader the reservation rb.
func setReadBudget(tr transport, rb *readBudget) {
	switch t := tr.(type) {
	case *streamTransport:
		t.r.budget = rb
	case *wsTransport:
		t.budget = rb
	case *closeWatch:
		setReadBudget(t.transport, rb)
	}
}

// grow returns a pooled buffer of at least size bytes holding b's bytes,
// reserved against the server's budget (waiting for room, without any
// lock, until there is some), and gives back the frame's previous pooled
// buffer. b is the frame so far: the reader's own small buffer or the
// last grow's. It returns false when the connection closed meanwhile.
func (r *readBudget) grow(b []byte, size int) ([]byte, bool) {
	cls, csize := frame.BufClass(size)
	if cls < 0 {
		return append(make([]byte, 0, size), b...), true // beyond any frame: the transports never ask
	}
	if !r.reserve(int64(csize)) {
		return nil, false
	}
	nb := append(frame.GetBuf(csize), b...)
	if r.buf != nil {
		r.unreserve(int64(cap(r.buf)))
		frame.PutBuf(r.buf)
	}
	r.buf = nb
	return nb, true
}

// done ends the frame: its buffer goes back to the pool, its reservation
// and the overdraw slot are released. The reader calls it once the frame
// was processed (and whenever it stops).
func (r *readBudget) done() {
	if r.buf != nil {
		frame.PutBuf(r.buf)
		r.buf = nil
	}
	r.release()
}

// release hands the frame's reservation over to what the frame turned
// into: the reader calls it under mu once the frame is processed, before
// the output it caused is published (account), so the two are not
// counted at once; held requests were counted when handed over (hold).
func (r *readBudget) release() {
	r.unreserve(r.reserved)
	if r.overdraw {
		r.overdraw = false
		if b := r.c.opts.sharedOut; b != nil {
			b.overdraw.Store(false)
			b.wake()
		}
	}
}

func (r *readBudget) unreserve(n int64) {
	if n == 0 {
		return
	}
	r.reserved -= n
	if b := r.c.opts.sharedOut; b != nil {
		b.add(-n)
	}
}

// reserve counts n more bytes of the frame being read against the
// server's total, waiting until they fit (see the top of this file).
func (r *readBudget) reserve(n int64) bool {
	b := r.c.opts.sharedOut
	if b == nil || r.overdraw {
		if b != nil {
			b.add(n)
		}
		r.reserved += n
		return true
	}
	mid := r.reserved > 0
	for {
		if b.tryReserve(n) {
			r.reserved += n
			return true
		}
		if (mid || n > b.limit) && b.overdraw.CompareAndSwap(false, true) {
			r.overdraw = true
			b.add(n)
			r.reserved += n
			return true
		}
		// Registered before the check again: a release in between either
		// is seen by the check or sees us waiting (add, wake).
		b.mu.Lock()
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		w := b.freed
		b.waiting.Add(1)
		b.mu.Unlock()
		r.c.budgetWaits.Add(1)
		ok := b.tryReserve(n)
		slot := !ok && (mid || n > b.limit) && !b.overdraw.Load() // freed meanwhile: try it again
		if !ok && !slot {
			select {
			case <-w:
			case <-r.c.done:
			}
		}
		b.waiting.Add(-1)
		r.c.budgetWaits.Add(-1)
		if ok {
			r.reserved += n
			return true
		}
		select {
		case <-r.c.done:
			return false
		default:
		}
	}
}

// tryReserve adds n to the total if that stays within the limit.
func (b *outBudget) tryReserve(n int64) bool {
	for {
		t := b.total.Load()
		if t+n > b.limit {
			return false
		}
		if b.total.CompareAndSwap(t, t+n) {
			return true
		}
	}
}

// add changes the total by n; when that leaves room and readers wait for
// it, it wakes them.
func (b *outBudget) add(n int64) {
	t := b.total.Add(n)
	if n < 0 && t < b.limit && b.waiting.Load() > 0 {
		b.wake()
	}
}

// wake wakes the readers waiting for room (reserve).
func (b *outBudget) wake() {
	if b.waiting.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}
