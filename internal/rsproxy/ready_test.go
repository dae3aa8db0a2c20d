package rsproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// deadAddr is a loopback address nothing listens on: dials to it fail at
// once.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// switchable makes p's dials to the addresses marked down fail, and
// counts every dial, as a server going and coming back would.
type switchable struct {
	mu    sync.Mutex
	down  map[string]bool
	dials int
}

func (sw *switchable) set(addr string, down bool) {
	sw.mu.Lock()
	sw.down[addr] = down
	sw.mu.Unlock()
}

func (sw *switchable) count() int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.dials
}

func switchDials(p *Proxy) *switchable {
	sw := &switchable{down: map[string]bool{}}
	real := p.dialer
	p.dialer = func(ctx context.Context, addr string) (net.Conn, error) {
		sw.mu.Lock()
		sw.dials++
		down := sw.down[addr]
		sw.mu.Unlock()
		if down {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
		}
		return real(ctx, addr)
	}
	return sw
}

// acceptor is a server that reads each connection's first frame, hands
// it on, and closes the connection (closing: the server ends it).
func acceptor(t *testing.T) (addr string, firsts chan frame.Type) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	firsts = make(chan frame.Type, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				f, err := frame.ReadLengthPrefixed(c, nil, 1<<16)
				if err != nil {
					return
				}
				h, _ := frame.ParseHeader(f)
				firsts <- h.Type
			}()
		}
	}()
	return ln.Addr().String(), firsts
}

// TestReadyFollowsServers: Ready (the proxy's /readyz) is an error naming
// each server and why while none can be dialled, nil once one can, and
// dials nothing while a server is known up. A connection the server
// ends makes the next Ready dial again, so a server that went since is
// seen. Before: always ready.
func TestReadyFollowsServers(t *testing.T) {
	live, firsts := acceptor(t)
	dead := deadAddr(t)
	p := newProxy(t, Config{Affinity: true, Backends: []string{dead, live}})
	sw := switchDials(p)
	sw.set(live, true)
	err := p.Ready()
	if err == nil || !strings.Contains(err.Error(), dead+": ") || !strings.Contains(err.Error(), live+": connect: connection refused") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("Ready with both servers down: %v; want one line naming both and why", err)
	}
	// The live server comes back: Ready dials it and is nil.
	sw.set(live, false)
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready with %s back: %v", live, err)
	}
	// Known up: Ready dials nothing.
	before := sw.count()
	for range 10 {
		if err := p.Ready(); err != nil {
			t.Fatal(err)
		}
	}
	if n := sw.count() - before; n != 0 {
		t.Fatalf("Ready dialled %d times with a server known up, want 0", n)
	}
	// A client's SETUP goes to the live server, which ends the
	// connection; then the server goes. Ready must not trust the old dial.
	c, err := net.Dial("tcp", serve(t, p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writeFrame(t, c, setup(t, nil))
	if got := <-firsts; got != frame.TypeSetup {
		t.Fatalf("the server got %v first", got)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read a byte; want the connection ended with the server's")
	}
	sw.set(live, true)
	if err := p.Ready(); err == nil {
		t.Fatal("Ready nil after the only reachable server ended a connection and went")
	}
}

func writeFrame(t *testing.T, c net.Conn, f []byte) {
	t.Helper()
	prefix, _ := frame.AppendLengthPrefix(nil, len(f))
	if _, err := c.Write(append(prefix, f...)); err != nil {
		t.Fatal(err)
	}
}

// TestSetupRejectedWhenNoServer: a SETUP no server can be dialled for is
// answered ERROR[REJECTED_SETUP] on stream 0 naming the servers (before:
// the connection closed without a word, which clients saw as a reset),
// then the connection ends cleanly even though the client sent a request
// after its SETUP that the proxy never read. A RESUME is still closed
// without an answer: any ERROR would end its session, and its server
// may come back.
func TestSetupRejectedWhenNoServer(t *testing.T) {
	a, b := deadAddr(t), deadAddr(t)
	p := newProxy(t, Config{Affinity: true, Backends: []string{a, b}})
	addr := serve(t, p)
	for _, tok := range [][]byte{nil, []byte("tok")} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing
		rr, err := frame.AppendRequestResponse(nil, 1, 0, nil, []byte("hi"))
		if err != nil {
			t.Fatal(err)
		}
		writeFrame(t, c, setup(t, tok))
		writeFrame(t, c, rr)
		f, err := frame.ReadLengthPrefixed(c, nil, 1<<16)
		if err != nil {
			t.Fatalf("SETUP (token %q): %v; want an ERROR frame", tok, err)
		}
		e, err := frame.ParseError(f)
		h, _ := frame.ParseHeader(f)
		if err != nil || h.StreamID != 0 || e.Code != frame.ErrorCodeRejectedSetup ||
			!strings.Contains(string(e.Data), a) || !strings.Contains(string(e.Data), b) {
			t.Fatalf("SETUP (token %q) answered %v stream %d %v %q (%v); want REJECTED_SETUP on stream 0 naming %s and %s", tok, h.Type, h.StreamID, e.Code, e.Data, err, a, b)
		}
		if n, err := c.Read(make([]byte, 64)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("after the ERROR: read %d bytes, %v; want the proxy's clean close (EOF), not a reset", n, err)
		}
		c.Close()
	}
	if st := p.Stats(); st.RejectedSetups != 2 {
		t.Fatalf("stats %+v, want 2 rejected SETUPs", st)
	}

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing
	writeFrame(t, c, resume(t, []byte("tok")))
	if n, err := c.Read(make([]byte, 64)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("RESUME with its server down: read %d bytes, %v; want closed without an answer", n, err)
	}
}
