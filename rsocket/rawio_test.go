package rsocket

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-acc
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// On a socket the frame reader reads with raw syscalls: frames come whole
// whatever the sizes and pauses, a read that waits for the peer holds only
// the small buffer, and EOF and a local close are the errors net.Conn
// gives.
func TestFrameReaderSocket(t *testing.T) {
	a, b := tcpPair(t)
	f := newFrameReader(b)
	if f.raw == nil {
		t.Fatal("a TCP connection is not read raw")
	}
	// Waits with at most smallRead bytes of a partial frame pending must
	// hold only the small buffer (a longer partial frame keeps the large).
	waits, smallWhileWaiting := 0, 0
	waiting := make(chan struct{}, 1)
	f.raw.onWait = func() {
		pending := f.w
		f.lend()
		if pending <= smallRead {
			waits++
			if f.large == nil && len(f.buf) == smallRead {
				smallWhileWaiting++
			}
		}
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	sizes := []int{0, 1, 64, smallRead, smallRead + 1, 5000, largeRead - 3, largeRead, 3 * largeRead, 7, 64}
	var stream bytes.Buffer
	for i, n := range sizes {
		stream.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
		stream.Write(bytes.Repeat([]byte{byte(i + 1)}, n))
	}
	all := stream.Bytes()
	// The writer sends in pieces, each once the reader waits for more, so
	// the reader waits on an empty socket many times, with partial frames
	// buffered or none.
	go func() {
		rest := all
		for _, cut := range []int{2, 40, 700, 9000, 70000, 1 << 20} {
			k := min(cut, len(rest))
			if _, err := a.Write(rest[:k]); err != nil {
				return
			}
			rest = rest[k:]
			// (A huge frame is read by net.Conn's Read, which does not
			// signal: then go on after a while; only the pacing depends
			// on it, not what is checked.)
			select {
			case <-waiting:
			case <-time.After(50 * time.Millisecond):
			}
		}
		a.Write(rest)
		a.(*net.TCPConn).CloseWrite()
	}()
	var buf []byte
	for i, n := range sizes {
		fr, err := f.readFrame(buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(fr, bytes.Repeat([]byte{byte(i + 1)}, n)) {
			t.Fatalf("frame %d: got %d bytes, want %d of %d", i, len(fr), n, i+1)
		}
		buf = fr[:0]
	}
	if _, err := f.readFrame(buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	if waits == 0 || smallWhileWaiting != waits {
		t.Fatalf("the reader waited %d times, %d of them with only the small buffer", waits, smallWhileWaiting)
	}

	// A read on a connection closed locally fails as net.Conn's does.
	_, d := tcpPair(t)
	g := newFrameReader(d)
	d.Close()
	_, err := g.readFrame(nil)
	var oe *net.OpError
	if !errors.Is(err, net.ErrClosed) || !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("read after close: %v (%T), want a read OpError wrapping net.ErrClosed", err, err)
	}
}

// A peer that sends requests and never reads the answers: the server's
// reader writes answers directly, but never waits for the socket, so it
// keeps reading (both ends blocked writing would deadlock) and a later
// fire-and-forget still arrives. Only the outbound budget stops reading
// (TestOutboundBudgetUnreadRequests); here it is above the 32 MiB of
// answers, since the test is about the direct write.
func TestReaderNotBlockedByPeerThatDoesNotRead(t *testing.T) {
	ctx := tctx(t)
	ln, _, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := newEcho()
	go Serve(ctx, ln, e, WithInlineHandlers(), WithOutboundBudget(64<<20))
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.(*net.TCPConn).SetReadBuffer(4 << 10) // fill up soon
	var out []byte
	put := func(b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out = b
	}
	add := func(f func(dst []byte) ([]byte, error)) {
		at := len(out)
		out = frame.ReserveLengthPrefix(out)
		put(f(out))
		if err := frame.SetLengthPrefix(out, at); err != nil {
			t.Fatal(err)
		}
	}
	add(func(dst []byte) ([]byte, error) {
		return frame.AppendSetup(dst, frame.Setup{MajorVersion: 1, KeepaliveInterval: 60_000, MaxLifetime: 600_000,
			MetadataMIME: []byte("application/octet-stream"), DataMIME: []byte("application/octet-stream")})
	})
	big := make([]byte, 64<<10)
	// 32 MiB of answers: far beyond what both socket buffers hold.
	for id := uint32(1); id < 2*512; id += 2 {
		add(func(dst []byte) ([]byte, error) { return frame.AppendRequestResponse(dst, id, 0, nil, big) })
	}
	add(func(dst []byte) ([]byte, error) {
		return frame.AppendRequestFNF(dst, 2001, 0, nil, []byte("still reading"))
	})
	werr := make(chan error, 1)
	go func() { _, err := raw.Write(out); werr <- err }()
	select {
	case got := <-e.got:
		if got != "still reading" {
			t.Fatalf("fire-and-forget carried %q", got)
		}
	case err := <-werr:
		if err != nil {
			t.Fatalf("writing the requests: %v", err)
		}
		select {
		case <-e.got:
		case <-ctx.Done():
			t.Fatal("the server stopped reading while its answers were not read")
		}
	case <-ctx.Done():
		t.Fatal("the server stopped reading while its answers were not read")
	}
}
