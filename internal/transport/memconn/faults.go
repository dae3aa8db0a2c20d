package memconn

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
)

// Faults says how often a FaultDialer's Send sessions misbehave. The
// probabilities apply per frame to Message frames (agent → sink) and Ack
// frames (sink → agent) only: a lost Hello, Welcome or Credit would stall
// a session in a way only the progress deadline recovers, and that is not
// what the simulation is after. Real TCP never drops, duplicates or
// reorders within a session; these faults go beyond it on purpose, so that
// the resend timer, the dedup index and the ack ranges all get exercised.
type Faults struct {
	Drop float64 // the frame is lost
	Dup  float64 // the frame arrives twice
	// Hold: the frame is held back until up to HoldFrames later frames of
	// its direction have overtaken it or HoldFor has passed (a reorder or
	// a delay).
	Hold       float64
	HoldFrames int
	HoldFor    time.Duration
	// DisconnectEvery: a session is reset after a number of frames (both
	// directions) drawn uniformly from [1, 2×DisconnectEvery]; 0 never.
	DisconnectEvery int
}

// FaultDialer wraps a Dialer's Send sessions in seeded faults. Session k
// (counting from 0) draws its faults from a PRNG seeded with (Seed, k), per
// direction, in frame order, so the same frames meet the same faults on a
// replay; the goroutines' interleaving is the Go scheduler's. Read
// sessions pass through untouched.
type FaultDialer struct {
	Inner  protocol.Dialer
	Seed   uint64
	Faults Faults

	mu       sync.Mutex
	sessions uint64
	calm     bool // no more faults, on any session
	down     bool // dials fail: the sink process is away
	conns    map[*faultConn]struct{}
	stats    FaultStats
}

// FaultStats counts what a FaultDialer did.
type FaultStats struct {
	Sessions, Dropped, Duplicated, Held, Disconnects uint64
}

// Stats returns the counts so far.
func (d *FaultDialer) Stats() FaultStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Calm stops all faults, for existing sessions too (disconnects included).
func (d *FaultDialer) Calm() {
	d.mu.Lock()
	d.calm = true
	d.mu.Unlock()
}

// SetDown makes new dials fail with StatusUnavailable while down is true,
// as dials to a process that is not running do.
func (d *FaultDialer) SetDown(down bool) {
	d.mu.Lock()
	d.down = down
	d.mu.Unlock()
}

// CutAll resets every open session, as a crash of either process does.
func (d *FaultDialer) CutAll() {
	d.mu.Lock()
	cs := make([]*faultConn, 0, len(d.conns))
	for c := range d.conns {
		cs = append(cs, c)
	}
	d.mu.Unlock()
	for _, c := range cs {
		c.Close(protocol.Errorf(protocol.StatusUnavailable, "memconn faults: connection reset"))
	}
}

func (d *FaultDialer) Read(ctx context.Context) (protocol.Conn, error) { return d.Inner.Read(ctx) }

func (d *FaultDialer) Send(ctx context.Context) (protocol.Conn, error) {
	d.mu.Lock()
	if d.down {
		d.mu.Unlock()
		return nil, protocol.Errorf(protocol.StatusUnavailable, "memconn faults: sink is down")
	}
	k := d.sessions
	d.sessions++
	d.stats.Sessions++
	d.mu.Unlock()
	inner, err := d.Inner.Send(ctx)
	if err != nil {
		return nil, err
	}
	c := &faultConn{
		d: d, inner: inner,
		out:  direction{rng: rand.New(rand.NewPCG(d.Seed, 2*k))},
		in:   direction{rng: rand.New(rand.NewPCG(d.Seed, 2*k+1))},
		recv: make(chan protocol.Frame, 1024),
	}
	if n := d.Faults.DisconnectEvery; n > 0 {
		c.disconnectAt = int64(1 + c.out.rng.IntN(2*n))
	}
	d.mu.Lock()
	if d.conns == nil {
		d.conns = map[*faultConn]struct{}{}
	}
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	go c.pump()
	go func() {
		<-inner.Context().Done()
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
	}()
	return c, nil
}

// fate is what happens to one frame.
type fate uint8

const (
	pass fate = iota
	drop
	dup
	hold
)

// draw decides a frame's fate: a frame subject to faults always takes
// exactly one draw per decision, so a session's sequence of fates depends
// only on its seed and its sequence of frames.
func (d *FaultDialer) draw(rng *rand.Rand) (fate, int) {
	f := d.Faults
	r := rng.Float64()
	n := 1 + rng.IntN(max(f.HoldFrames, 1))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.calm {
		return pass, 0
	}
	switch {
	case r < f.Drop:
		d.stats.Dropped++
		return drop, 0
	case r < f.Drop+f.Dup:
		d.stats.Duplicated++
		return dup, 0
	case r < f.Drop+f.Dup+f.Hold:
		d.stats.Held++
		return hold, n
	}
	return pass, 0
}

type heldFrame struct {
	f        protocol.Frame
	left     int // frames still to overtake it
	released bool
}

// direction is one way of a session: its PRNG and its held frames.
type direction struct {
	rng  *rand.Rand
	held []*heldFrame
}

// faultConn is one Send session seen from the agent.
type faultConn struct {
	d     *FaultDialer
	inner protocol.Conn

	mu  sync.Mutex // out and the sending side of inner
	out direction
	// frames counts both directions, for disconnectAt. Atomic: the pump
	// must never wait for mu, which a Send blocked on a full queue holds
	// until the peer reads, and the peer may be waiting for the pump.
	frames       atomic.Int64
	disconnectAt int64

	in      direction // the pump's
	recvMu  sync.Mutex
	recv    chan protocol.Frame // from the pump to Recv; closed with recvErr set
	recvErr error
	closed  bool
}

// counted counts a frame toward the session's disconnect and reports
// whether the session must be reset now.
func (c *faultConn) counted() bool {
	c.d.mu.Lock()
	calm := c.d.calm
	c.d.mu.Unlock()
	n := c.frames.Add(1)
	reset := !calm && c.disconnectAt > 0 && n == c.disconnectAt
	if reset {
		c.d.mu.Lock()
		c.d.stats.Disconnects++
		c.d.mu.Unlock()
		c.inner.Close(protocol.Errorf(protocol.StatusUnavailable, "memconn faults: disconnect after %d frames", c.disconnectAt))
	}
	return reset
}

func (c *faultConn) Send(f protocol.Frame) error {
	if c.counted() {
		return c.inner.Send(f) // the session is gone: the error says how
	}
	m, ok := f.(*protocol.Message)
	if !ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inner.Send(f)
	}
	fa, n := c.d.draw(c.out.rng)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch fa {
	case drop:
		return c.overtake()
	case hold:
		// The caller may reuse m once Send returns (protocol.Conn).
		cp := *m
		cp.Payload = append([]byte(nil), m.Payload...)
		h := &heldFrame{f: &cp, left: n}
		c.out.held = append(c.out.held, h)
		time.AfterFunc(c.d.Faults.HoldFor, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.releaseOut(h)
		})
		return nil
	case dup:
		if err := c.inner.Send(f); err != nil {
			return err
		}
	}
	if err := c.inner.Send(f); err != nil {
		return err
	}
	return c.overtake()
}

// overtake counts one frame past every held one and sends those whose
// turn has come. Caller holds c.mu.
func (c *faultConn) overtake() error {
	for _, h := range c.out.held {
		if h.left--; h.left <= 0 {
			c.releaseOut(h)
		}
	}
	return nil
}

// releaseOut sends a held frame unless it went already; a send error
// means the session ended, which the caller's next Send or Recv reports.
// Caller holds c.mu.
func (c *faultConn) releaseOut(h *heldFrame) {
	if h.released {
		return
	}
	h.released = true
	c.inner.Send(h.f)
	keep := c.out.held[:0]
	for _, x := range c.out.held {
		if !x.released {
			keep = append(keep, x)
		}
	}
	c.out.held = keep
}

// pump reads the sink's frames and applies the faults on the way to Recv.
func (c *faultConn) pump() {
	for {
		f, err := c.inner.Recv()
		if err != nil {
			c.recvMu.Lock()
			c.recvErr, c.closed = err, true
			close(c.recv)
			c.recvMu.Unlock()
			return
		}
		if c.counted() {
			continue // reset: Recv reports the session's end next
		}
		if _, ok := f.(*protocol.Ack); !ok {
			c.deliver(f)
			continue
		}
		switch fa, n := c.d.draw(c.in.rng); fa {
		case drop:
		case dup:
			c.deliver(f)
			c.deliver(f)
		case hold:
			// memconn frames are the receiver's: keeping the pointer is safe.
			h := &heldFrame{f: f, left: n}
			c.recvMu.Lock()
			c.in.held = append(c.in.held, h)
			c.recvMu.Unlock()
			time.AfterFunc(c.d.Faults.HoldFor, func() { c.releaseIn(h) })
			continue
		default:
			c.deliver(f)
		}
		c.recvMu.Lock()
		var due []*heldFrame
		for _, h := range c.in.held {
			if h.left--; h.left <= 0 {
				due = append(due, h)
			}
		}
		c.recvMu.Unlock()
		for _, h := range due {
			c.releaseIn(h)
		}
	}
}

func (c *faultConn) releaseIn(h *heldFrame) {
	c.recvMu.Lock()
	if h.released {
		c.recvMu.Unlock()
		return
	}
	h.released = true
	keep := c.in.held[:0]
	for _, x := range c.in.held {
		if !x.released {
			keep = append(keep, x)
		}
	}
	c.in.held = keep
	c.recvMu.Unlock()
	c.deliver(h.f)
}

// deliver hands a frame to Recv; a frame for a session that ended is lost,
// as it would be in a reset connection.
func (c *faultConn) deliver(f protocol.Frame) {
	c.recvMu.Lock()
	defer c.recvMu.Unlock()
	if c.closed {
		return
	}
	select {
	case c.recv <- f:
	default:
		// Recv is 1024 frames behind: a session that slow is reset, as a
		// peer whose buffers overflow would be.
		c.inner.Close(protocol.Errorf(protocol.StatusUnavailable, "memconn faults: receiver overrun"))
	}
}

func (c *faultConn) Recv() (protocol.Frame, error) {
	f, ok := <-c.recv
	if !ok {
		return nil, c.recvErr
	}
	return f, nil
}

func (c *faultConn) CloseSend() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inner.CloseSend()
}

func (c *faultConn) Close(err error)          { c.inner.Close(err) }
func (c *faultConn) Context() context.Context { return c.inner.Context() }
func (c *faultConn) Peer() protocol.PeerInfo  { return c.inner.Peer() }
