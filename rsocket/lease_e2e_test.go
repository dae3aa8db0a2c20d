package rsocket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// readRawFrame reads one length-prefixed frame.
func readRawFrame(r io.Reader) ([]byte, error) {
	var p [3]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return nil, err
	}
	f := make([]byte, int(p[0])<<16|int(p[1])<<8|int(p[2]))
	_, err := io.ReadFull(r, f)
	return f, err
}

func mustFrame(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func writeRawFrame(w io.Writer, f []byte) error {
	n := len(f)
	_, err := w.Write(append([]byte{byte(n >> 16), byte(n >> 8), byte(n)}, f...))
	return err
}

// rawPeer is the server end of a pipe, driven frame by frame: frames
// delivers what the client sends, except KEEPALIVE and LEASE.
func rawPeer(t *testing.T) (client net.Conn, server net.Conn, frames chan []byte) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	frames = make(chan []byte, 64)
	go func() {
		defer close(frames)
		for {
			f, err := readRawFrame(b)
			if err != nil {
				return
			}
			if h, _ := frame.ParseHeader(f); h.Type == frame.TypeKeepalive || h.Type == frame.TypeLease {
				continue
			}
			frames <- f
		}
	}()
	return a, b, frames
}

func nextType(t *testing.T, frames chan []byte, within time.Duration) (frame.Type, bool) {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("the client closed the connection")
		}
		h, _ := frame.ParseHeader(f)
		return h.Type, true
	case <-time.After(within):
		return 0, false
	}
}

// TestLeaseExpiredRequestWaits (issue 22 item 4): a server that sent one
// LEASE with a TTL of 300 ms and then nothing. A request within the TTL
// goes out; one after it waits for the next LEASE instead of being sent
// (before: the client's machine had not seen time pass on the idle
// connection and sent it). "Requester MUST NOT send more than Number of
// Requests specified in the LEASE frame within the Time-To-Live value in
// the LEASE" (Protocol.md "Lease Semantics").
func TestLeaseExpiredRequestWaits(t *testing.T) {
	ctx := tctx(t)
	a, b, frames := rawPeer(t)
	c, err := ClientConn(ctx, a, WithLease(time.Hour, 100))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if typ, ok := nextType(t, frames, 10*time.Second); !ok || typ != frame.TypeSetup {
		t.Fatalf("first frame %v %v, want SETUP", typ, ok)
	}
	if err := writeRawFrame(b, mustFrame(frame.AppendLease(nil, 300, 10, nil))); err != nil {
		t.Fatal(err)
	}
	if err := c.FireAndForget(ctx, Payload{Data: []byte("in time")}); err != nil {
		t.Fatal(err)
	}
	if typ, ok := nextType(t, frames, 10*time.Second); !ok || typ != frame.TypeRequestFNF {
		t.Fatalf("request within the lease: got %v %v", typ, ok)
	}
	// Past the TTL: wait until the client itself says the lease is gone
	// (its timer at the lease's expiry), plus the reproduction's 1.5 s.
	testwait.For(t, "the lease to expire", func() bool { return !c.LeaseAvailable() })
	time.Sleep(1200 * time.Millisecond)
	sent := make(chan error, 1)
	go func() { sent <- c.FireAndForget(ctx, Payload{Data: []byte("late")}) }()
	if typ, ok := nextType(t, frames, 500*time.Millisecond); ok {
		t.Fatalf("the client sent %v after the lease's TTL, without a new LEASE", typ)
	}
	if err := writeRawFrame(b, mustFrame(frame.AppendLease(nil, 10_000, 1, nil))); err != nil {
		t.Fatal(err)
	}
	if typ, ok := nextType(t, frames, 10*time.Second); !ok || typ != frame.TypeRequestFNF {
		t.Fatalf("request after a new LEASE: got %v %v", typ, ok)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestLeaseAfterResume (issue 22 item 5): a resumable connection with
// lease through a proxy that cuts it. The server's lease (3 requests, TTL
// 1 h, so its renewal is 30 min away) is used up before the cut; after the
// resume the server sends a fresh LEASE right after RESUME_OK and the
// client's 4th request goes through at once (before: no LEASE until the
// renewal timer, and the client kept the old connection's lease).
// "LEASE semantics MUST be restarted upon a new connection by sending a
// LEASE frame from the server" (Protocol.md "Resume Operation").
func TestLeaseAfterResume(t *testing.T) {
	addr, _ := resumeServer(t, "tcp", ResumeConfig{}, WithLease(time.Hour, 3))
	p := newCutProxy(t, addr, 1, 0, 1, 1)
	c, err := Dial(context.Background(), "tcp://"+p.Addr(), WithLease(time.Hour, 3),
		WithResume(ResumeConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := tctx(t)
	for i := range 3 {
		if _, err := c.RequestResponse(ctx, Payload{Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if c.LeaseAvailable() {
		t.Fatal("the lease of 3 allows a 4th request")
	}
	p.CutAll()
	testwait.For(t, "resume", func() bool { return c.ResumeStats().Resumed >= 1 })
	// Bounded well below the 30 min renewal: only a LEASE sent on resume
	// lets it through.
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err := c.RequestResponse(rctx, Payload{Data: []byte("after resume")})
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("no LEASE after the resume: the request still waits")
	}
	if err != nil || string(got.Data) != "after resume" {
		t.Fatalf("request after resume: %q %v", got.Data, err)
	}
}

// TestChannelCreditsZeroRefused (issue 22 item 9): WithChannelCredits(0)
// made a channel's responder send no REQUEST_N until its handler asked,
// while "a Responder MUST respond to an initial REQUEST_CHANNEL frame with
// a REQUEST_N frame" (Protocol.md "Request Channel"). The option now
// refuses 0: the server and the client do not start.
func TestChannelCreditsZeroRefused(t *testing.T) {
	ctx := tctx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := Serve(ctx, ln, newEcho(), WithChannelCredits(0)); err == nil || !strings.Contains(err.Error(), "WithChannelCredits(0)") {
		t.Fatalf("Serve with WithChannelCredits(0): %v", err)
	}
	a, b := net.Pipe()
	defer b.Close()
	if _, err := ClientConn(ctx, a, WithChannelCredits(0)); err == nil {
		t.Fatal("ClientConn with WithChannelCredits(0) started")
	}
	if _, err := Dial(ctx, "tcp://"+ln.Addr().String(), WithChannelCredits(0)); err == nil {
		t.Fatal("Dial with WithChannelCredits(0) started")
	}
	// A responder with credits answers REQUEST_CHANNEL with REQUEST_N at
	// once, before its handler consumes anything.
	a, b = net.Pipe()
	defer b.Close()
	ServeConn(ctx, a, newEcho(), WithChannelCredits(1))
	go func() {
		_ = writeRawFrame(b, mustFrame(frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 60_000, MaxLifetime: 600_000})))
		_ = writeRawFrame(b, mustFrame(frame.AppendRequestChannel(nil, 1, 0, 1, nil, []byte("x"))))
	}()
	for {
		f, err := readRawFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := frame.ParseHeader(f)
		if h.Type == frame.TypeRequestN && h.StreamID == 1 {
			return
		}
		if h.Type != frame.TypePayload {
			t.Fatalf("got %v before REQUEST_N", h.Type)
		}
	}
}
