package rsocket

import (
	"crypto/tls"
	"errors"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// foreignClientBytes are the first bytes of clients of other protocols.
var foreignClientBytes = map[string]string{
	"http2":   "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
	"get":     "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"post":    "POST /post/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx",
	"put":     "PUT /x HTTP/1.1\r\nHost: x\r\n\r\n",
	"head":    "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n",
	"patch":   "PATCH /files/x HTTP/1.1\r\nHost: x\r\n\r\n",
	"options": "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
}

// A client of another protocol (gRPC's HTTP/2, HTTP/1, TLS) at a plain,
// TLS or resumable RSocket listener is closed as soon as its first bytes
// are read, without an answer; the setup timeout here is an hour.
// Before, their first bytes were taken for the length of a 1.4 to 5.3 MB
// frame, and the connection waited for the setup timeout (10 s by
// default): `xfer send --to grpc://` at the RSocket port waited 10 s per
// attempt.
func TestForeignClientClosedAtOnce(t *testing.T) {
	for _, scheme := range []string{"tcp", "tls", "tcp+resume"} {
		var opts []Option
		s := scheme
		if scheme == "tcp+resume" {
			opts, s = append(opts, WithResume(ResumeConfig{})), "tcp"
		}
		u, cfg := serveSmall(t, s, append(opts, WithSetupTimeout(time.Hour))...)
		for name, b := range foreignClientBytes {
			t.Run(scheme+"/"+name, func(t *testing.T) {
				nc := dialRaw(t, u, cfg)
				if _, err := nc.Write([]byte(b)); err != nil {
					t.Fatal(err)
				}
				if got := awaitServerClose(t, nc); len(got) > 0 {
					t.Fatalf("the server answered %q", got)
				}
			})
		}
	}
	// A TLS client at a plain listener: its ClientHello is refused, and
	// the handshake fails instead of waiting.
	t.Run("tcp/tls-client", func(t *testing.T) {
		u, _ := serveSmall(t, "tcp", WithSetupTimeout(time.Hour))
		nc, err := net.Dial("tcp", u[len("tcp://"):])
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(closeBound))
		err = tls.Client(nc, &tls.Config{InsecureSkipVerify: true}).Handshake()
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("handshake: %v; want the server to close the connection", err)
		}
	})
}

// The check never refuses what an RSocket peer may send first: a
// server's, anything on stream 0 (a SETUP or a RESUME is), even with a
// length prefix that spells "PRI", "GET" or a TLS record; a client's, any
// frame but a RESERVED one, or a METADATA_PUSH on a stream other than 0.
// The real peers are the interop tests' (rsocket-java, -js, -py, -go).
func TestForeignNeverRefusesRSocket(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var heads [][]byte
	for _, b := range foreignClientBytes {
		heads = append(heads, []byte(b))
	}
	heads = append(heads, []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc"), []byte("HTTP/1.1 400 Bad Request\r\n"), []byte("\x00\x00\x12\x04\x00\x00\x00\x00\x00"))
	for i := 0; i < 100000; i++ {
		b := make([]byte, 9+rng.Intn(20))
		rng.Read(b)
		if i < 2*len(heads) {
			copy(b, heads[i%len(heads)])
		}
		setup := append([]byte(nil), b...)
		copy(setup[3:7], []byte{0, 0, 0, 0})
		if looks, _ := foreign(setup, sniffServer); looks != "" {
			t.Fatalf("a server took %q, on stream 0, for %s", setup, looks)
		}
		typ := frame.Type(b[7] >> 2)
		if typ == frame.TypeReserved || typ == frame.TypeMetadataPush && string(b[3:7]) != "\x00\x00\x00\x00" {
			continue
		}
		if looks, _ := foreign(b, sniffClient); looks != "" {
			t.Fatalf("a client took %q, a %s frame, for %s", b, typ, looks)
		}
	}
	// And the real first frames.
	if looks, decided := foreign(rawSetupFrame(t), sniffServer); looks != "" || !decided {
		t.Fatalf("SETUP: %q, %v", looks, decided)
	}
}

// foreignServer accepts connections on 127.0.0.1 and answers each with
// answer (none: closes it at once, as a TLS listener does to plain text).
func foreignServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				buf := make([]byte, 4096)
				if _, err := nc.Read(buf); err != nil {
					return
				}
				_, _ = nc.Write([]byte(answer))
			}()
		}
	}()
	return ln.Addr().String()
}

// A client (Dial) at a listener of another kind fails its requests with
// an error that names the URL and the listener it should be, and wraps a
// *NotRSocketError. Before: a bare "connection lost: EOF" (tcp:// at a
// TLS listener), "unexpected EOF" (at an HTTP or WebSocket listener, and
// only after its header timeout) or "RESERVED frame on stream 67108864"
// (at a gRPC listener); a tls:// or ws:// client at a plain RSocket
// listener waited for its setup timeout, then failed with EOF.
func TestClientNamesListenerMismatch(t *testing.T) {
	tlsURL, _ := serveSmall(t, "tls", WithSetupTimeout(time.Hour))
	plainURL, _ := serveSmall(t, "tcp", WithSetupTimeout(time.Hour))
	wsURL, _ := serveSmall(t, "ws", WithSetupTimeout(time.Hour))
	for _, c := range []struct {
		name, url, want string
		opts            []Option
	}{
		{"tcp-at-tls", "tcp://" + tlsURL[len("tls://"):], "closed the connection before answering: is it an RSocket listener (tcp://, not tls:// or ws://)?", nil},
		{"tcp-at-http", "tcp://" + foreignServer(t, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"), "sent an HTTP/1 response (an HTTP or WebSocket listener), not RSocket: is it an RSocket listener (tcp://", nil},
		{"tcp-at-grpc", "tcp://" + foreignServer(t, "\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x05\x00\x00\x40\x00"), "sent an HTTP/2 preface (a gRPC or HTTP/2 listener), not RSocket", nil},
		{"tcp-at-closing", "tcp://" + foreignServer(t, ""), "closed the connection before answering", nil},
		{"tls-at-tcp", "tls://" + plainURL[len("tcp://"):], "closed the connection before answering: is it a TLS RSocket listener (tls://", []Option{WithTLS(&tls.Config{InsecureSkipVerify: true})}},
		{"ws-at-tcp", "ws://" + plainURL[len("tcp://"):] + "/rsocket", "closed the connection before answering: is it a WebSocket RSocket listener (ws://", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := tctx(t)
			conn, err := Dial(ctx, c.url, c.opts...)
			if err == nil {
				defer conn.Close()
				_, err = conn.RequestResponse(ctx, Payload{Data: []byte("x")})
			}
			var nr *NotRSocketError
			if err == nil || !errors.As(err, &nr) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.url) {
				t.Fatalf("error %v (%T); want one wrapping a *NotRSocketError, naming %s and saying %q", err, err, c.url, c.want)
			}
		})
	}
	// A real RSocket server is not taken for another protocol.
	for _, u := range []string{plainURL, wsURL} {
		conn, err := Dial(tctx(t), u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.RequestResponse(tctx(t), Payload{Data: []byte("x")}); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		conn.Close()
	}
}
