package rsocket

import (
	"io"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// The reader: readLoop reads frames and feeds them to the machine under
// mu, every frame already buffered under the same lock, then stops
// reading (without mu) while oneway handlers wait for a slot or the
// output the peer caused is over the budget (budget.go). frameReader
// reads length-prefixed frames from a byte stream, lending its large
// buffer back to a pool while the peer is idle (lend, borrow), and reads
// frames larger than that buffer as their bytes arrive (readHuge), against
// the server's budget (readbudget.go).

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
		if c.closed || c.transport != tr || (c.resumable != nil && c.resumable.down) {
			c.mu.Unlock()
			c.combine()
			return
		}
		if err != nil {
			if c.writeStalled.Load() {
				err = ErrWriteTimeout // writeWatch closed the transport under us
			}
			if nr, ok := err.(*NotRSocketError); ok {
				// Its streams' errors wrap it (EventError).
				c.notRSocket = nr
				c.opts.log.Debug("rsocket: closing a connection whose peer does not speak RSocket", "peer", nr.Peer, "looks", nr.Looks)
			}
			c.machine.TransportClosed(err)
			c.release()
			return
		}
		q0 := c.queued() + c.inflight
		now := c.now()
		c.reading = readingFrame{rb: rb, f: f}
		c.machine.Receive(now, f)
		// Frames already buffered are taken under the same lock: one
		// lock, one dispatch and one write for a burst of requests. The
		// events lend the frame's bytes (conn.Config.LendFrames): each
		// frame's are dispatched (drain) before the next is read into
		// the buffer.
		for n := 0; n < 256 && st != nil && whole(st); n++ {
			if !c.closed {
				c.drain()
			}
			if f, err = st.readFrame(f); err != nil || c.closed {
				break // the next readFrame returns the error again
			}
			c.reading.f = f
			c.machine.Receive(now, f)
		}
		if !c.closed {
			c.drain()
			if c.queued()+c.inflight > q0 { // the frames' own output (echoes, inline answers, errors)
				c.peerOutAdded = true
				c.markRead()
			}
		}
		c.reading = readingFrame{}
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
	src   io.Reader
	raw   *rawSock // nil: not a plain socket
	buf   []byte   // small[:] or a pooled large buffer
	r, w  int      // buf[r:w] is read and not yet returned
	large *[]byte
	last  int // bytes the last Read returned
	// afterHuge: the last frame was larger than the buffer (readHuge).
	// The next read into the buffer then takes at most smallRead bytes:
	// the next frame is most likely large too, and what of it the buffer
	// holds is copied into its own buffer (readHuge), up to 64 KiB of each
	// frame of an upload's chunks, 5 % of an RSocket upload's CPU; its
	// header is read and the rest goes straight into the frame's buffer.
	afterHuge bool
	small     [smallRead]byte
	stall     stallDeadline // deadlines.go: set while a frame is partial
	// budget reserves frames larger than largeRead against the server's
	// budget and lends their buffers (readbudget.go); nil (a resumable
	// listener's first frame): plain allocations.
	budget *readBudget
	// sniff: the first bytes are checked for another protocol's
	// (foreign.go) until that is decided. peer names the other end in a
	// NotRSocketError: the URL a client dialled, the address a server's
	// connection comes from. scheme is a client's URL's ("": not dialled
	// by URL, and no NotRSocketError for a close before the first
	// frame); framed: a frame came, or began (readHuge).
	sniff        sniffRole
	peer, scheme string
	framed       bool
}

const (
	smallRead = 512
	largeRead = 64 << 10
	// hugeStep is what a frame larger than largeRead gets at first (see
	// readHuge).
	hugeStep = 1 << 20
)

var largeBufs = sync.Pool{New: func() any { b := make([]byte, largeRead); return &b }}

func newFrameReader(src io.Reader) *frameReader {
	f := &frameReader{src: src, raw: newRawSock(src)}
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
	f.raw.rbuf = f.space()
}

// space is where the next read goes: the free end of the buffer, at most
// smallRead bytes of it after a huge frame (afterHuge).
func (f *frameReader) space() []byte {
	to := f.buf[f.w:]
	if f.afterHuge {
		to = to[:min(len(to), smallRead)]
	}
	return to
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
		if f.sniff != sniffOff {
			if err := f.sniffFirst(); err != nil {
				return nil, err
			}
		}
		if f.w-f.r >= frame.LengthPrefixSize {
			b := f.buf[f.r:f.w]
			n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
			end := frame.LengthPrefixSize + n
			if len(b) >= end {
				f.r += end
				f.afterHuge = false
				f.framed = true
				f.sniff = sniffOff
				return b[frame.LengthPrefixSize:end:end], nil
			}
			if end > largeRead && f.sniff == sniffOff {
				f.framed = true
				f.afterHuge = true
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
		to := f.space()
		var n int
		var err error
		if f.raw != nil {
			n, err = f.raw.read(to)
		} else {
			n, err = f.src.Read(to)
		}
		f.w += n
		f.last = n
		if err != nil && n == 0 {
			if err == io.EOF && f.w > f.r {
				err = io.ErrUnexpectedEOF
			}
			if !f.framed && f.scheme != "" && closedEarly(err) {
				// The server closed the connection before its first frame.
				err = &NotRSocketError{Peer: f.peer, Hint: schemeHint(f.scheme)}
			}
			return nil, err
		}
	}
}

// sniffFirst checks the first bytes for another protocol's (foreign.go):
// a *NotRSocketError when they are, and no more checks once decided.
func (f *frameReader) sniffFirst() error {
	looks, decided := foreign(f.buf[f.r:f.w], f.sniff)
	if !decided {
		return nil
	}
	role := f.sniff
	f.sniff = sniffOff
	if looks == "" {
		return nil
	}
	e := &NotRSocketError{Peer: f.peer, Looks: looks}
	if role == sniffClient {
		e.Hint = schemeHint(f.scheme)
	} else {
		e.Hint = "this is an RSocket listener"
	}
	return e
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
		k, err := f.src.Read(dst[len(dst):min(cap(dst), n)])
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
