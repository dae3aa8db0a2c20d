package rsocket

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/lab/rsockethostile"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// The deadlines of deadlines.go. Each test sets them small and waits for
// the outcome (the server closes the connection) with a generous bound;
// nothing here measures time.

// closeBound is how long a test waits for the server to close a
// connection: far above the small deadlines the tests set (a WebSocket
// close also waits up to 5 s for the client's answer to the close
// handshake, which these clients never give), and below the 30 s of the
// default frame stall timeout, which would otherwise close a partial
// SETUP too. (The setup timeout does not matter once SETUP came.)
const closeBound = 20 * time.Second

// serveSmall serves the echo responder on scheme (tcp, tls, ws) with opts
// and returns its URL and, for tls, the client's config.
func serveSmall(t *testing.T, scheme string, opts ...Option) (string, *tls.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var ccfg *tls.Config
	if scheme == "tls" {
		ca := testpki.NewCA(t)
		cert := ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)
		opts = append(opts, WithTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
		ccfg = &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	}
	u := scheme + "://127.0.0.1:0"
	if scheme == "ws" {
		u += "/rsocket"
	}
	ln, path, err := Listen(u)
	if err != nil {
		t.Fatal(err)
	}
	if scheme == "ws" {
		go ServeWebSocket(ctx, ln, path, newEcho(), opts...)
	} else {
		go Serve(ctx, ln, newEcho(), opts...)
	}
	return scheme + "://" + ln.Addr().String() + path, ccfg
}

// dialRaw opens a byte stream to a tcp:// or tls:// URL.
func dialRaw(t *testing.T, u string, cfg *tls.Config) net.Conn {
	t.Helper()
	addr := u[len("tcp://"):]
	var (
		nc  net.Conn
		err error
	)
	if cfg != nil {
		nc, err = tls.Dial("tcp", addr, cfg)
	} else {
		nc, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

// awaitServerClose reads until the server closes nc and returns what it
// sent; it fails the test if closeBound passes first.
func awaitServerClose(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(closeBound))
	var got bytes.Buffer
	_, err := io.Copy(&got, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection within %v", closeBound)
	}
	return got.Bytes()
}

// rawSetupFrame is a client's SETUP, length-prefixed, with the longest
// keepalive lifetime: the server does not end the connection for silence
// during a test.
func rawSetupFrame(t testing.TB) []byte {
	t.Helper()
	return rawFrame(frame.AppendSetup(nil, frame.Setup{MajorVersion: frame.ProtocolMajor, MinorVersion: frame.ProtocolMinor,
		KeepaliveInterval: 1<<31 - 1, MaxLifetime: 1<<31 - 1,
		MetadataMIME: []byte("application/octet-stream"), DataMIME: []byte("application/octet-stream")}))
}

// A client that connects and sends nothing, or part of a length prefix,
// is closed once the setup timeout passes: on TCP, TLS and WebSocket.
// Before the setup timeout, a listener without resumption held them
// forever.
func TestSetupTimeout(t *testing.T) {
	for _, scheme := range []string{"tcp", "tls"} {
		for _, tc := range []struct {
			name string
			send []byte
		}{
			{"silent", nil},
			{"two prefix bytes", []byte{0, 1}},
			{"half a SETUP", rawSetupFrame(t)[:20]},
		} {
			t.Run(scheme+"/"+tc.name, func(t *testing.T) {
				u, cfg := serveSmall(t, scheme, WithSetupTimeout(100*time.Millisecond))
				nc := dialRaw(t, u, cfg)
				if _, err := nc.Write(tc.send); err != nil {
					t.Fatal(err)
				}
				// It says why: ERROR[CONNECTION_ERROR] on stream 0.
				got := awaitServerClose(t, nc)
				f, err := frame.ReadLengthPrefixed(bytes.NewReader(got), nil, frame.MaxFrameSize)
				if err != nil {
					t.Fatalf("the server sent %q before closing: %v", got, err)
				}
				if e, err := frame.ParseError(f); err != nil || e.StreamID != 0 || e.Code != frame.ErrorCodeConnectionError {
					t.Fatalf("the server sent %+v (%v) before closing; want ERROR[CONNECTION_ERROR] on stream 0", e, err)
				}
			})
		}
	}
	t.Run("ws/silent", func(t *testing.T) {
		u, _ := serveSmall(t, "ws", WithSetupTimeout(100*time.Millisecond))
		rep, err := rsockethostile.Run(tctx(t), rsockethostile.Config{URL: u, Mode: rsockethostile.Silent, Conns: 2, Duration: closeBound})
		if err != nil || rep.Opened != 2 || rep.Closed != 2 {
			t.Fatalf("%+v %v; want both connections closed by the server", rep, err)
		}
	})
	t.Run("resumable/two prefix bytes", func(t *testing.T) {
		u, _ := serveSmall(t, "tcp", WithSetupTimeout(100*time.Millisecond), WithServerResume(nil))
		nc := dialRaw(t, u, nil)
		if _, err := nc.Write([]byte{0, 1}); err != nil {
			t.Fatal(err)
		}
		awaitServerClose(t, nc)
	})
}

// A client that sends SETUP and then part of a frame (half a 64 KiB
// request, or a 16 MiB length prefix and 13 bytes) is closed once the
// frame stall timeout passes, on TCP, TLS and WebSocket. Before, it held
// its connection (and the buffer of its frame) forever.
func TestFrameStallTimeout(t *testing.T) {
	req, _ := frame.AppendRequestResponse(nil, 1, 0, nil, make([]byte, 64<<10))
	for _, scheme := range []string{"tcp", "tls"} {
		for _, tc := range []struct {
			name string
			send []byte
		}{
			{"half a frame", rawFrame(req, nil)[:32<<10]},
			{"two prefix bytes", []byte{0, 1}},
			{"huge length", append([]byte{0xff, 0xff, 0xff}, make([]byte, 13)...)},
		} {
			t.Run(scheme+"/"+tc.name, func(t *testing.T) {
				u, cfg := serveSmall(t, scheme, WithFrameStallTimeout(100*time.Millisecond))
				nc := dialRaw(t, u, cfg)
				if _, err := nc.Write(append(rawSetupFrame(t), tc.send...)); err != nil {
					t.Fatal(err)
				}
				awaitServerClose(t, nc)
			})
		}
	}
	for _, mode := range []rsockethostile.Mode{rsockethostile.HalfFrame, rsockethostile.HugeLength} {
		t.Run("ws/"+string(mode), func(t *testing.T) {
			u, _ := serveSmall(t, "ws", WithFrameStallTimeout(100*time.Millisecond))
			rep, err := rsockethostile.Run(tctx(t), rsockethostile.Config{URL: u, Mode: mode, Conns: 2, FrameSize: 64 << 10, Duration: closeBound})
			if err != nil || rep.Opened != 2 || rep.Closed != 2 {
				t.Fatalf("%+v %v; want both connections closed by the server", rep, err)
			}
		})
	}
	t.Run("resumable/half a frame", func(t *testing.T) {
		u, _ := serveSmall(t, "tcp", WithFrameStallTimeout(100*time.Millisecond), WithServerResume(nil))
		nc := dialRaw(t, u, nil)
		if _, err := nc.Write(append(rawSetupFrame(t), rawFrame(req, nil)[:32<<10]...)); err != nil {
			t.Fatal(err)
		}
		awaitServerClose(t, nc)
	})
}

// The stall timeout bounds silence within a frame, not the frame's time
// nor the silence between frames: a client idle after its SETUP for
// twice the timeout, then sending a 256 KiB request in 32 pieces 20 ms
// apart (about twice the timeout in all, each gap a tenth of it), is
// answered.
func TestFrameStallTimeoutSpareSlowFrames(t *testing.T) {
	const stall = 200 * time.Millisecond
	u, _ := serveSmall(t, "tcp", WithFrameStallTimeout(stall), WithSetupTimeout(stall))
	nc := dialRaw(t, u, nil)
	if _, err := nc.Write(rawSetupFrame(t)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * stall) // idle between frames: not this timeout's business
	data := bytes.Repeat([]byte("slow"), 64<<10)
	req, _ := frame.AppendRequestResponse(nil, 1, 0, nil, data)
	b := rawFrame(req, nil)
	for piece := len(b)/32 + 1; len(b) > 0; {
		n := min(piece, len(b))
		if _, err := nc.Write(b[:n]); err != nil {
			t.Fatalf("the server closed the connection during a steady frame: %v", err)
		}
		b = b[n:]
		time.Sleep(stall / 10) // pacing the sender, not waiting for an outcome
	}
	_ = nc.SetReadDeadline(time.Now().Add(closeBound))
	f, err := frame.ReadLengthPrefixed(bufio.NewReader(nc), nil, frame.MaxFrameSize)
	if err != nil {
		t.Fatalf("no answer to the slow request: %v", err)
	}
	p, err := frame.ParsePayload(f)
	if err != nil || p.StreamID != 1 || !bytes.Equal(p.Data, data) {
		t.Fatalf("answer: stream %d, %d bytes, %v; want the 256 KiB echo on stream 1", p.StreamID, len(p.Data), err)
	}
}
