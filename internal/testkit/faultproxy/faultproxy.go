// Package faultproxy is the one fault-injecting TCP proxy of sluice's
// tests: it forwards loopback TCP connections to an upstream and breaks
// them the ways a network does, at points a test chooses. The resume
// tests of rsocket, the transfer tests of internal/xfer and the chaos
// tests of cmd/sluice each had a copy of their own; this is their union:
//
//   - cut: close both sides of a connection, bytes in flight lost
//     (CutAll now, or CutNext at a byte offset of the next connections),
//     optionally with an RST (Cuts.Reset, ResetAll), as a killed peer;
//   - refuse: close new connections at once (Refuse), as a server that
//     is gone;
//   - freeze: stop forwarding both ways and hold new connections
//     unforwarded, every connection left open (Freeze, Unfreeze), as a
//     stopped process or a link that went dark looks from either end;
//   - hole: drop what the upstream sends, counted (Hole, Holed);
//   - move: send new connections elsewhere (SetUpstream, Balance).
//
// It is for tests only (internal/docs checks that no product package
// imports it).
package faultproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards the connections it accepts on a loopback port to its
// upstream. New starts it; the test's cleanup stops it.
type Proxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string
	balance  []string       // when set, replaces upstream: round robin
	landed   map[string]int // connections per balanced upstream
	refuse   bool
	thaw     chan struct{} // closed unless frozen
	plan     Cuts
	left     int // cuts of plan still to hand out
	rng      *rand.Rand
	live     map[*link]bool
	stopped  bool
	gated    int // pipes and connections held by a freeze

	hole     atomic.Bool
	holed    atomic.Int64
	accepted atomic.Int32
	cuts     atomic.Int32
	wg       sync.WaitGroup
}

// Cuts plans how the next connections break: each of the next Count
// connections the proxy forwards is cut when Up bytes have gone from the
// client towards the upstream, or Down bytes from the upstream towards
// the client, whichever comes first (0: that direction does not cut it).
// Bytes past the offset are lost, as those in flight on a broken link
// are. Connections after those pass everything.
type Cuts struct {
	Count    int
	Up, Down int
	// MaxUp and MaxDown, if set, draw each connection's offsets at random
	// instead (from a generator seeded with Seed, so a run repeats): Up in
	// [max(1, MinUp), MaxUp), Down in [1, MaxDown]. The proxy's first
	// connection's Up is at least FirstMinUp (past a handshake the test
	// does not mean to break, such as an RSocket SETUP).
	Seed           uint64
	MaxUp, MaxDown int
	MinUp          int
	FirstMinUp     int
	// Reset cuts the client's side with an RST rather than a close (the
	// upstream's side is closed, so that it still reads what was
	// forwarded): to the client, the peer was killed or the link dropped.
	Reset bool
}

// link is one forwarded connection: client side c, upstream side s (nil
// until dialled).
type link struct {
	c, s net.Conn
	once sync.Once
}

// New starts a proxy to upstream (host:port) on a loopback port; it
// forwards everything until told otherwise. The test's cleanup closes it
// and every connection it forwards, and waits for its goroutines.
func New(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: upstream, thaw: make(chan struct{}), live: map[*link]bool{}}
	close(p.thaw)
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.stop)
	return p
}

// Addr is the proxy's host:port, what clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream sends new connections to addr; the ones forwarded go on
// where they are.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = addr
}

// Balance sends each new connection to the next of upstreams in turn (a
// round-robin TCP balancer), counted in Landed.
func (p *Proxy) Balance(upstreams ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.balance = upstreams
}

// Landed is how many connections Balance sent to each upstream.
func (p *Proxy) Landed() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.landed))
	for k, v := range p.landed {
		m[k] = v
	}
	return m
}

// Refuse, on, closes every new connection at once, as a port nothing
// listens on does after the accept; off, forwards them again.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = on
}

// CutNext plans the cuts of the next connections (replacing any plan
// not used up).
func (p *Proxy) CutNext(c Cuts) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan, p.left = c, c.Count
	if c.MaxUp > 0 || c.MaxDown > 0 {
		p.rng = rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))
	}
}

// CutAll cuts every connection being forwarded now (closes both sides,
// counted in Cuts): a test's cut at a point it chose.
func (p *Proxy) CutAll() { p.each(func(l *link) { p.cut(l, true, none) }) }

// ResetAll cuts every connection being forwarded now with an RST on both
// sides (counted in Cuts).
func (p *Proxy) ResetAll() { p.each(func(l *link) { p.cut(l, true, both) }) }

// CloseAll closes every connection being forwarded now, not counted as a
// cut: to end a test's connections, not to break them.
func (p *Proxy) CloseAll() { p.each(func(l *link) { p.cut(l, false, none) }) }

// Freeze stops forwarding in both directions: what a connection's pipe
// has read it holds, new connections are accepted and held undialled,
// every connection stays open, and TCP back-pressure does the rest.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozenLocked() || p.stopped {
		return
	}
	p.thaw = make(chan struct{})
}

// Unfreeze lets everything Freeze held go on.
func (p *Proxy) Unfreeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozenLocked() {
		close(p.thaw)
	}
}

// Hole, on, drops the bytes the upstream sends instead of forwarding
// them (counted in Holed); the connection stays up.
func (p *Proxy) Hole(on bool) { p.hole.Store(on) }

// Holed is how many upstream bytes Hole dropped.
func (p *Proxy) Holed() int64 { return p.holed.Load() }

// Accepted is how many connections the proxy accepted (refused ones
// included).
func (p *Proxy) Accepted() int { return int(p.accepted.Load()) }

// Cuts is how many connections were cut: by a CutNext plan, CutAll or
// ResetAll.
func (p *Proxy) Cuts() int { return int(p.cuts.Load()) }

func (p *Proxy) frozenLocked() bool {
	select {
	case <-p.thaw:
		return false
	default:
		return true
	}
}

func (p *Proxy) stop() {
	p.mu.Lock()
	p.stopped, p.refuse = true, true
	p.mu.Unlock()
	_ = p.ln.Close()
	// Close before thawing: what a freeze held must not reach anyone
	// after the test.
	p.CloseAll()
	p.Unfreeze()
	p.wg.Wait()
}

func (p *Proxy) each(f func(*link)) {
	p.mu.Lock()
	ls := make([]*link, 0, len(p.live))
	for l := range p.live {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		f(l)
	}
}

// rst says which sides of a cut get an RST instead of a close.
type rst int

const (
	none rst = iota
	client
	both
)

// cut closes both sides of l, once; counted, it is a cut (Cuts).
func (p *Proxy) cut(l *link, counted bool, r rst) {
	l.once.Do(func() {
		p.mu.Lock()
		delete(p.live, l)
		s := l.s
		p.mu.Unlock()
		if counted { // before the close: who sees the end may ask Cuts at once
			p.cuts.Add(1)
		}
		for i, c := range []net.Conn{l.c, s} {
			if c == nil {
				continue
			}
			if tc, ok := c.(*net.TCPConn); ok && (r == both || r == client && i == 0) {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
}

// gate blocks while the proxy is frozen.
func (p *Proxy) gate() {
	p.mu.Lock()
	thaw := p.thaw
	frozen := p.frozenLocked()
	if frozen {
		p.gated++
	}
	p.mu.Unlock()
	if !frozen {
		return
	}
	<-thaw
	p.mu.Lock()
	p.gated--
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		n := p.accepted.Add(1)
		p.mu.Lock()
		if p.refuse {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up := p.upstream
		if len(p.balance) > 0 {
			up = p.balance[int(n-1)%len(p.balance)]
			if p.landed == nil {
				p.landed = map[string]int{}
			}
			p.landed[up]++
		}
		upAt, downAt, r := p.offsetsLocked(n)
		l := &link{c: c}
		p.live[l] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(l, up, upAt, downAt, r)
	}
}

// offsetsLocked draws connection n's cut offsets from the plan (0: no
// cut that way).
func (p *Proxy) offsetsLocked(n int32) (up, down int, r rst) {
	if p.left <= 0 {
		return 0, 0, none
	}
	p.left--
	c := p.plan
	if c.Reset {
		r = client
	}
	if c.MaxUp <= 0 && c.MaxDown <= 0 {
		return c.Up, c.Down, r
	}
	lo := max(1, c.MinUp)
	if n == 1 {
		lo = max(lo, c.FirstMinUp)
	}
	if c.MaxUp > 0 {
		up = lo + p.rng.IntN(max(c.MaxUp-lo, 1))
	}
	if c.MaxDown > 0 {
		down = 1 + p.rng.IntN(c.MaxDown)
	}
	return up, down, r
}

func (p *Proxy) forward(l *link, up string, upAt, downAt int, r rst) {
	defer p.wg.Done()
	p.gate()
	s, err := net.Dial("tcp", up)
	p.mu.Lock()
	gone := !p.live[l]
	if err == nil && !gone {
		l.s = s
	}
	p.mu.Unlock()
	if err != nil || gone {
		if s != nil {
			_ = s.Close()
		}
		p.cut(l, false, none)
		return
	}
	upDone := make(chan struct{})
	p.wg.Add(1)
	go func() { defer p.wg.Done(); defer close(upDone); p.pipe(s, l.c, upAt, false, l, r) }()
	p.pipe(l.c, s, downAt, true, l, r)
	<-upDone
	p.cut(l, false, none) // both ways ended: nothing left to forward
}

// pipe copies src to dst; at is the offset to cut at (0: never), down
// says it carries upstream → client.
func (p *Proxy) pipe(dst, src net.Conn, at int, down bool, l *link, r rst) {
	buf := make([]byte, 32<<10)
	n := 0
	for {
		k, err := src.Read(buf)
		if k > 0 {
			p.gate()
			if down && p.hole.Load() {
				p.holed.Add(int64(k))
				k = 0
			}
		}
		if k > 0 {
			if at > 0 && n+k >= at {
				_, _ = dst.Write(buf[:at-n])
				p.cut(l, true, r)
				return
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				p.cut(l, false, none)
				return
			}
			n += k
		}
		if err != nil {
			if err != io.EOF {
				p.cut(l, false, none)
				return
			}
			// Half close: pass it on, the other direction may go on.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				p.cut(l, false, none)
			}
			return
		}
	}
}
