// Package cutproxy is a TCP proxy for resumption tests that cuts
// connections at seeded random byte offsets, or all at once when a test
// says, as a broken link would.
package cutproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy that cuts connections: each of the first n
// connections gets a random byte offset per direction (seeded), and the
// connection is cut (both sides closed) when either direction has
// forwarded that many bytes. Bytes beyond the offset are lost, as the
// bytes in flight of a real broken link are. Connections after the n-th
// pass everything. Its plain fields are changed only inside Set (under
// its lock); the atomic ones are read at any time.
type Proxy struct {
	ln       net.Listener
	mu       sync.Mutex
	Upstream string
	// Balance, when set, replaces Upstream: each new connection goes to
	// the next of these in turn (a round-robin TCP balancer), counted in
	// Landed.
	Balance []string
	Landed  map[string]int
	rng     *rand.Rand
	Left    int // cuts still to hand out
	minUp   int // the first connection's client→server offset is at least this (past SETUP)
	// MinUpAll: every connection's client→server offset is at least this
	// (past a WebSocket handshake and the RESUME), so that every cut
	// breaks a resumed session rather than a redial.
	MinUpAll int
	maxUp    int // client→server offsets in [1, maxUp]
	maxDown  int // server→client offsets in [1, maxDown]
	// discard: at a server→client cut, read and drop this many more bytes
	// from the server before closing, so the client is surely that far
	// behind what the server sent.
	discard int
	Refuse  bool // close new connections at once
	// live are the cut functions of the connections being forwarded
	// (CutAll); Hole: drop server→client bytes instead of forwarding
	// them, counting them in Holed.
	live  map[int32]func(bool)
	Hole  atomic.Bool
	Holed atomic.Int64

	Accepted atomic.Int32
	Cuts     atomic.Int32
	CutCh    chan struct{} // one send per cut
	wg       sync.WaitGroup
}

// New starts a proxy to upstream on a loopback port; the first n
// connections are cut at offsets drawn from seed (client→server in
// [1, maxUp], server→client in [1, maxDown]). It stops with the test.
func New(t testing.TB, upstream string, seed uint64, n, maxUp, maxDown int) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, Upstream: upstream, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		Left: n, minUp: 1024, maxUp: maxUp, maxDown: maxDown, CutCh: make(chan struct{}, n+64)}
	go p.serve()
	t.Cleanup(func() {
		// Close what is still open first: after a failure the client may
		// hold its connection forever, and the wait below would hang.
		p.Set(func(p *Proxy) { p.Refuse = true })
		_ = ln.Close()
		p.CloseAll()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the proxy's settings under its lock.
func (p *Proxy) Set(f func(p *Proxy)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		n := p.Accepted.Add(1)
		p.mu.Lock()
		up, refuse := p.Upstream, p.Refuse
		if len(p.Balance) > 0 {
			up = p.Balance[int(n-1)%len(p.Balance)]
			if p.Landed == nil {
				p.Landed = map[string]int{}
			}
			p.Landed[up]++
		}
		upAt, downAt := -1, -1
		if !refuse && p.Left > 0 {
			p.Left--
			lo := max(1, p.MinUpAll)
			if n == 1 {
				lo = max(lo, p.minUp)
			}
			upAt = lo + p.rng.IntN(max(p.maxUp-lo, 1))
			downAt = 1 + p.rng.IntN(p.maxDown)
		}
		discard := p.discard
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", up)
		if err != nil {
			_ = c.Close()
			continue
		}
		var once sync.Once
		cut := func(counted bool) {
			once.Do(func() {
				_ = c.Close()
				_ = s.Close()
				p.mu.Lock()
				delete(p.live, n)
				p.mu.Unlock()
				if counted {
					p.Cuts.Add(1)
					p.CutCh <- struct{}{}
				}
			})
		}
		p.mu.Lock()
		if p.live == nil {
			p.live = map[int32]func(bool){}
		}
		p.live[n] = cut
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.pipe(s, c, upAt, 0, false, cut) }()
		go func() { defer p.wg.Done(); p.pipe(c, s, downAt, discard, true, cut) }()
	}
}

// CutAll cuts every connection being forwarded now, as a broken link
// would: a test's deterministic cut, at a point it chose.
func (p *Proxy) CutAll() { p.each(true) }

// CloseAll closes every connection being forwarded, not counted as cuts.
func (p *Proxy) CloseAll() { p.each(false) }

func (p *Proxy) each(counted bool) {
	p.mu.Lock()
	cuts := make([]func(bool), 0, len(p.live))
	for _, f := range p.live {
		cuts = append(cuts, f)
	}
	p.mu.Unlock()
	for _, f := range cuts {
		f(counted)
	}
}

// pipe copies src to dst; at is the cut offset (-1: never).
// down: server → client.
func (p *Proxy) pipe(dst, src net.Conn, at, discard int, down bool, cut func(bool)) {
	buf := make([]byte, 32<<10)
	n := 0
	for {
		k, err := src.Read(buf)
		if k > 0 && down && p.Hole.Load() {
			// Server→client while the hole is open: lost on the way.
			p.Holed.Add(int64(k))
			k = 0
		}
		if k > 0 {
			if at >= 0 && n+k >= at {
				_, _ = dst.Write(buf[:at-n])
				for d := n + k - at; d < discard; {
					k, err := src.Read(buf)
					d += k
					if err != nil {
						break
					}
				}
				cut(true)
				return
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				cut(false)
				return
			}
			n += k
		}
		if err != nil {
			if err != io.EOF {
				cut(false)
				return
			}
			// Half close: pass it on, the other direction may go on.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				cut(false)
			}
			return
		}
	}
}
