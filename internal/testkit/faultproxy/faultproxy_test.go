package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// echo is an upstream that sends greeting to each connection, then
// echoes what it reads, counting connections and bytes received.
type echo struct {
	ln       net.Listener
	conns    atomic.Int32
	received atomic.Int64
}

func startEcho(t *testing.T, greeting []byte) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			go func() {
				defer c.Close()
				if _, err := c.Write(greeting); err != nil {
					return
				}
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					e.received.Add(int64(n))
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *echo) addr() string { return e.ln.Addr().String() }

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

func TestForwardsBothWays(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	c := dial(t, p)
	roundTrip(t, c, "hello")
	if p.Accepted() != 1 || p.Cuts() != 0 {
		t.Fatalf("accepted %d, cuts %d; want 1, 0", p.Accepted(), p.Cuts())
	}
}

// A planned cut at a byte offset towards the client: the client gets
// exactly that many bytes and then the end; the next connection, past
// the plan, gets everything.
func TestCutNextDown(t *testing.T) {
	greeting := bytes.Repeat([]byte("g"), 100)
	e := startEcho(t, greeting)
	p := New(t, e.addr())
	p.CutNext(Cuts{Count: 1, Down: 10})
	got, _ := io.ReadAll(dial(t, p))
	if len(got) != 10 {
		t.Fatalf("the cut connection carried %d bytes, want 10", len(got))
	}
	if p.Cuts() != 1 {
		t.Fatalf("cuts %d, want 1", p.Cuts())
	}
	c := dial(t, p)
	if _, err := io.ReadFull(c, make([]byte, len(greeting))); err != nil {
		t.Fatalf("the connection after the plan: %v", err)
	}
	roundTrip(t, c, "still up")
}

// A planned cut towards the upstream with Reset: the upstream gets the
// first Up bytes only, then the end, and the client an RST.
func TestCutNextUpReset(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	p.CutNext(Cuts{Count: 1, Up: 5, Reset: true})
	c := dial(t, p)
	if _, err := c.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	_, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the client's read after a reset cut: %v, want ECONNRESET", err)
	}
	testwait.For(t, "the upstream to read what was forwarded", func() bool { return e.received.Load() >= 5 })
	if n := e.received.Load(); n != 5 || p.Cuts() != 1 {
		t.Fatalf("upstream received %d bytes, cuts %d; want 5, 1", n, p.Cuts())
	}
}

// Random offsets repeat with the seed, stay in their ranges, and the
// proxy's first connection's Up offset respects FirstMinUp.
func TestRandomCutsRepeatWithTheSeed(t *testing.T) {
	plan := Cuts{Count: 50, Seed: 7, MaxUp: 4096, MaxDown: 100, MinUp: 10, FirstMinUp: 1024}
	draw := func() [][2]int {
		p := &Proxy{}
		p.CutNext(plan)
		var out [][2]int
		for n := int32(1); n <= 51; n++ {
			up, down, _ := p.offsetsLocked(n)
			out = append(out, [2]int{up, down})
		}
		return out
	}
	a, b := draw(), draw()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("connection %d: offsets %v then %v with one seed", i+1, a[i], b[i])
		}
		up, down := a[i][0], a[i][1]
		switch {
		case i == 50:
			if up != 0 || down != 0 {
				t.Fatalf("connection past the plan cut at %v", a[i])
			}
		case i == 0 && up < 1024, up < 10, up >= 4096, down < 1, down > 100:
			t.Fatalf("connection %d: offsets %v out of range", i+1, a[i])
		}
	}
}

// CutAll breaks every connection and counts; CloseAll ends them and does
// not; new connections go on being forwarded after either.
func TestCutAllAndCloseAll(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	c1, c2 := dial(t, p), dial(t, p)
	roundTrip(t, c1, "a")
	roundTrip(t, c2, "b")
	p.CutAll()
	for _, c := range []net.Conn{c1, c2} {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection read after CutAll")
		}
	}
	if p.Cuts() != 2 {
		t.Fatalf("cuts %d after CutAll of 2, want 2", p.Cuts())
	}
	c3 := dial(t, p)
	roundTrip(t, c3, "c")
	p.CloseAll()
	if _, err := c3.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection read after CloseAll")
	}
	if p.Cuts() != 2 {
		t.Fatalf("cuts %d after CloseAll, want still 2", p.Cuts())
	}
}

// ResetAll ends the client's connection with an RST.
func TestResetAll(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	c := dial(t, p)
	roundTrip(t, c, "a")
	p.ResetAll()
	if _, err := io.ReadAll(c); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after ResetAll: %v, want ECONNRESET", err)
	}
}

// Refused connections are closed at once and never reach the upstream;
// after Refuse(false) they are forwarded again.
func TestRefuse(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	p.Refuse(true)
	if got, err := io.ReadAll(dial(t, p)); err != nil || len(got) != 0 {
		t.Fatalf("a refused connection: %q, %v; want the end at once", got, err)
	}
	if e.conns.Load() != 0 {
		t.Fatal("a refused connection reached the upstream")
	}
	p.Refuse(false)
	roundTrip(t, dial(t, p), "back")
}

// Frozen, the proxy holds what it read and the connections it accepts;
// unfrozen, both go on.
func TestFreezeHoldsUntilUnfreeze(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	c := dial(t, p)
	roundTrip(t, c, "before")
	p.Freeze()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	late := dial(t, p)
	gated := func() int { p.mu.Lock(); defer p.mu.Unlock(); return p.gated }
	testwait.For(t, "the write and the new connection held at the freeze", func() bool { return gated() == 2 })
	if e.received.Load() != int64(len("before")) || e.conns.Load() != 1 {
		t.Fatalf("frozen, the upstream got %d bytes and %d connections; want only the %d bytes and 1 connection from before",
			e.received.Load(), e.conns.Load(), len("before"))
	}
	p.Unfreeze()
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after the thaw: %q, %v", got, err)
	}
	roundTrip(t, late, "late")
}

// A hole drops what the upstream sends, counted, and keeps the
// connection; closed, forwarding goes on.
func TestHole(t *testing.T) {
	e := startEcho(t, nil)
	p := New(t, e.addr())
	c := dial(t, p)
	p.Hole(true)
	if _, err := c.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the echo to fall in the hole", func() bool { return p.Holed() == 3 })
	p.Hole(false)
	roundTrip(t, c, "d")
}

// SetUpstream moves new connections; Balance spreads them in turn.
func TestSetUpstreamAndBalance(t *testing.T) {
	a, b := startEcho(t, nil), startEcho(t, nil)
	p := New(t, a.addr())
	roundTrip(t, dial(t, p), "a")
	p.SetUpstream(b.addr())
	roundTrip(t, dial(t, p), "b")
	if a.conns.Load() != 1 || b.conns.Load() != 1 {
		t.Fatalf("connections a %d, b %d; want 1 each", a.conns.Load(), b.conns.Load())
	}
	p.Balance(a.addr(), b.addr())
	for range 4 {
		roundTrip(t, dial(t, p), "x")
	}
	if l := p.Landed(); l[a.addr()] != 2 || l[b.addr()] != 2 {
		t.Fatalf("landed %v, want 2 on each", l)
	}
}
