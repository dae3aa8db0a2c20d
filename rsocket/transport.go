package rsocket

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
	"github.com/sluicehq/sluice/rsocket/netaccept"
)

// streamTransport is a byte stream (TCP, net.Pipe) with 24-bit
// length-prefixed frames.
type streamTransport struct {
	c net.Conn
	r *frameReader
}

func newStreamTransport(c net.Conn) *streamTransport {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // frames are coalesced by the writer; never wait for Nagle
	}
	t := &streamTransport{c: c, r: newFrameReader(c)}
	t.r.stall = stallDeadline{set: c.SetReadDeadline, d: defaultFrameStallTimeout}
	return t
}

func (t *streamTransport) readFrame(buf []byte) ([]byte, error) {
	return t.r.readFrame(buf)
}

func (t *streamTransport) writeFrames(out []byte) error {
	_, err := t.c.Write(out)
	return err
}

func (t *streamTransport) Close() error { return t.c.Close() }

// wsTransport carries one frame per binary WebSocket message.
type wsTransport struct {
	c *websocket.Conn
	// ctx is the reads': Background, except that a resumable listener's
	// first read is bounded by the setup timeout (resume_transport.go).
	// A context that can end costs the library a registration per read
	// (twice the allocations of a request-response), so the frame stall
	// timeout is a timer that closes the connection instead
	// (deadlines.go).
	ctx    context.Context
	stallD time.Duration
	stall  *time.Timer
	// budget reserves messages larger than largeRead against the server's
	// budget and lends their buffers (readbudget.go); nil: plain
	// allocations. A message's length is not known before its end (the
	// library does not tell it), so the reservation grows with the
	// message.
	budget *readBudget
}

func newWSTransport(c *websocket.Conn) *wsTransport {
	c.SetReadLimit(frame.MaxFrameSize)
	t := &wsTransport{c: c, ctx: context.Background(), stallD: defaultFrameStallTimeout}
	t.stall = time.AfterFunc(time.Hour, func() { _ = c.CloseNow() })
	t.stall.Stop()
	return t
}

// readFrame reads the next binary message into buf. From a message's
// first frame header to its end, the bytes must not stop for longer than
// the frame stall timeout (stallD): each read that brings some restarts
// it. Waiting for a message to start is not bounded here.
func (t *wsTransport) readFrame(buf []byte) ([]byte, error) {
	for {
		typ, r, err := t.c.Reader(t.ctx)
		if err != nil {
			return nil, t.readErr(err)
		}
		t.stall.Reset(t.stallD)
		b := buf[:0]
		for {
			if len(b) == cap(b) {
				if t.budget != nil && cap(b) >= largeRead {
					t.stall.Stop() // waiting for room is ours, not the peer's
					var ok bool
					if b, ok = t.budget.grow(b, min(2*cap(b), frame.MaxFrameSize)); !ok {
						return nil, errReadBudgetClosed
					}
					t.stall.Reset(t.stallD)
				} else {
					b = slices.Grow(b, max(smallRead, cap(b)))
				}
			}
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				t.stall.Stop()
				return nil, t.readErr(err)
			}
			if n > 0 {
				t.stall.Reset(t.stallD)
			}
		}
		t.stall.Stop()
		if typ == websocket.MessageBinary && len(b) > 0 {
			return b, nil
		}
		if t.budget != nil {
			t.budget.done() // b is dropped: its pooled buffer and reservation with it
		}
		// A text message is not an RSocket frame: the spec's WebSocket
		// transport uses binary messages only; drop it. Neither is an
		// empty one (a frame has at least its 6-byte header): a
		// connection cut in the middle of a message hands one over here
		// before its error, and a resumable session must not end for it.
	}
}

func (t *wsTransport) readErr(err error) error {
	if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
		return io.EOF
	}
	return err
}

func (t *wsTransport) writeFrames(out []byte) error {
	for len(out) > 0 {
		f, rest, ok := conn.NextFrame(out)
		if !ok {
			return errors.New("rsocket: internal error: partial frame in output")
		}
		if err := t.c.Write(t.ctx, websocket.MessageBinary, f); err != nil {
			return err
		}
		out = rest
	}
	return nil
}

func (t *wsTransport) Close() error {
	t.stall.Stop()
	return t.c.Close(websocket.StatusNormalClosure, "")
}

// abort closes tr at once, without a closing handshake that would queue
// behind a stalled write.
func abort(tr transport) error {
	if t, ok := tr.(*wsTransport); ok {
		return t.c.CloseNow()
	}
	return tr.Close()
}

// start makes a Conn over tr and runs its loop.
func start(ctx context.Context, tr transport, role conn.Role, opts []Option) (*Conn, error) {
	return startConn(ctx, tr, role, buildOptions(role, opts), nil)
}

// errServerStopped ends the transports of durable sessions at shutdown.
var errServerStopped = errors.New("rsocket: server stopped")

// startConn makes a Conn over tr and runs its loop; setup, when not nil,
// runs on the new Conn before anything else does (resume.go).
func startConn(ctx context.Context, tr transport, role conn.Role, o options, setup func(*Conn)) (*Conn, error) {
	if o.err != nil {
		_ = tr.Close()
		return nil, o.err
	}
	c, err := newConn(ctx, tr, o)
	if err != nil {
		_ = tr.Close()
		return nil, err
	}
	if setup != nil {
		setup(c)
	}
	switch t := tr.(type) {
	case *streamTransport:
		t.r.stall.d = o.frameStallOrDefault()
	case *wsTransport:
		t.stallD = o.frameStallOrDefault()
	}
	if role == conn.Server && setup == nil {
		// A resumable listener read the first frame already (resume.go).
		c.watchSetup(o.setupTimeoutOrDefault())
	}
	if role == conn.Client {
		if err := c.machine.Start(c.now()); err != nil {
			_ = tr.Close()
			return nil, err
		}
		if o.lease {
			c.grantLease()
		}
		close(c.setup)
	}
	go c.run()
	// Ending ctx (Serve's, ServeConn's, ClientConn's) closes the connection.
	stop := context.AfterFunc(ctx, func() {
		_ = c.do(func() error {
			if c.resumable != nil && c.resumable.j != nil {
				// A journaled session outlives the server:
				// drop the transport without ending the session, so that
				// the client resumes with the next server on the journal.
				c.machine.TransportClosed(errServerStopped)
				return nil
			}
			return c.machine.Close(frame.ErrorCodeConnectionError, "shutting down")
		})
	})
	context.AfterFunc(c.ctx, func() { stop() }) // a long-lived server must not keep one callback per closed connection (c.ctx ends at close; no goroutine waits for it)
	return c, nil
}

// ClientConn runs the client end over an established byte stream (a
// net.Pipe end for an in-memory connection, or any net.Conn).
func ClientConn(ctx context.Context, nc net.Conn, opts ...Option) (*Conn, error) {
	return start(ctx, newStreamTransport(nc), conn.Client, opts)
}

// ServeConn runs the server end over an established byte stream.
func ServeConn(ctx context.Context, nc net.Conn, r Responder, opts ...Option) (*Conn, error) {
	return start(ctx, newServerStreamTransport(nc), conn.Server, append([]Option{WithResponder(r)}, opts...))
}

// newServerStreamTransport is a server's stream transport, which closes
// at once a connection whose first bytes are another protocol's
// (foreign.go).
func newServerStreamTransport(nc net.Conn) *streamTransport {
	t := newStreamTransport(nc)
	t.r.sniff = sniffServer
	if a := nc.RemoteAddr(); a != nil {
		t.r.peer = a.String()
	}
	return t
}

// WithTLS makes Dial speak TLS for tls:// and wss:// URLs with cfg (nil:
// the system's roots, server name from the URL), and makes Serve and
// ServeWebSocket serve TLS with cfg (which must then hold a certificate;
// set ClientCAs and ClientAuth for mutual TLS). Dial refuses it with a
// tcp:// or ws:// URL rather than silently talking in clear text.
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// tlsHandshakeTimeout bounds a server's TLS handshake: a client that
// connects and says nothing must not hold a goroutine and a socket forever.
const tlsHandshakeTimeout = 10 * time.Second

// Dial connects to tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or
// wss://HOST:PORT/PATH. ctx bounds the dial (and the TLS handshake) only;
// the connection lives until Close or its failure. A server certificate
// that does not verify fails Dial.
func Dial(ctx context.Context, rawURL string, opts ...Option) (*Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(rawURL, "://") {
		return nil, fmt.Errorf("rsocket: bad URL %q: want tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH", rawURL)
	}
	o := buildOptions(conn.Client, opts)
	if o.err != nil {
		return nil, o.err
	}
	if o.tls != nil && (u.Scheme == "tcp" || u.Scheme == "ws") {
		return nil, fmt.Errorf("rsocket: URL %q: WithTLS needs a tls:// or wss:// URL", rawURL)
	}
	if o.resume != nil {
		return dialResumable(ctx, rawURL, u, o, opts)
	}
	tr, err := dialTransport(ctx, rawURL, u, o)
	if err != nil {
		return nil, err
	}
	return start(context.WithoutCancel(ctx), tr, conn.Client, opts)
}

// dialTransport dials u (tcp, tls, ws or wss) for Dial, and again for
// each redial of a resumable connection.
func dialTransport(ctx context.Context, rawURL string, u *url.URL, o options) (transport, error) {
	switch u.Scheme {
	case "tcp", "tls":
		var nc net.Conn
		var err error
		if u.Scheme == "tls" {
			d := tls.Dialer{Config: o.tls} // the handshake completes in DialContext
			nc, err = d.DialContext(ctx, "tcp", u.Host)
		} else {
			var d net.Dialer
			nc, err = d.DialContext(ctx, "tcp", u.Host)
		}
		if err != nil {
			if u.Scheme == "tls" && closedEarly(err) {
				// No answer to our ClientHello: a plain listener (this
				// package's closes at once) or one of another protocol.
				return nil, fmt.Errorf("rsocket: %w", &NotRSocketError{Peer: rawURL, Hint: schemeHint(u.Scheme)})
			}
			return nil, fmt.Errorf("rsocket: dial %s: %w", rawURL, err)
		}
		t := newStreamTransport(nc)
		t.r.sniff, t.r.peer = sniffClient, rawURL
		if o.resume == nil {
			// A resumable client's server may close a connection
			// unanswered on purpose (a stopping server: resume_accept.go):
			// that is no mismatch.
			t.r.scheme = u.Scheme
		}
		return t, nil
	case "ws", "wss":
		var do *websocket.DialOptions
		if u.Scheme == "wss" && o.tls != nil {
			// A transport of its own: the TLS config is this connection's,
			// and HTTP/2 (which cannot carry a WebSocket here) stays off.
			do = &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: o.tls.Clone()}}}
		}
		wc, _, err := websocket.Dial(ctx, rawURL, do)
		if err != nil {
			if closedEarly(err) {
				// No HTTP answer: a plain RSocket listener (with this
				// package's: closed at our request line) or one of
				// another protocol.
				return nil, fmt.Errorf("rsocket: %w", &NotRSocketError{Peer: rawURL, Hint: schemeHint(u.Scheme)})
			}
			return nil, fmt.Errorf("rsocket: dial %s: %w", rawURL, err)
		}
		return newWSTransport(wc), nil
	}
	return nil, fmt.Errorf("rsocket: URL %q: scheme must be tcp, tls, ws or wss", rawURL)
}

// Serve accepts RSocket over TCP on ln until ctx ends, serving each
// connection with r; with WithTLS, over TLS.
func Serve(ctx context.Context, ln net.Listener, r Responder, opts ...Option) error {
	o := buildOptions(conn.Server, opts)
	if o.err != nil {
		return o.err
	}
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls.Clone())
	}
	opts = serverOptions(o, opts) // one outbound budget for all its connections
	return netaccept.Serve(ctx, ln, func(nc net.Conn) error {
		if o.resume != nil {
			go serveResumableConn(ctx, nc, r, opts)
			return nil
		}
		if tc, ok := nc.(*tls.Conn); ok {
			// Handshake off the accept loop, so one slow client does not
			// hold up the others, and bounded in time.
			go func() {
				hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
				err := tc.HandshakeContext(hctx)
				cancel()
				if err != nil {
					o.log.Debug("rsocket: TLS handshake failed", "remote", tc.RemoteAddr().String(), "err", err)
					_ = tc.Close()
					return
				}
				if _, err := ServeConn(ctx, tc, r, opts...); err != nil {
					o.log.Warn("rsocket: cannot serve connection", "err", err)
				}
			}()
			return nil
		}
		_, err := ServeConn(ctx, nc, r, opts...)
		return err
	})
}

// WebSocketHandler serves RSocket over WebSocket (mount it at the path).
func WebSocketHandler(ctx context.Context, r Responder, opts ...Option) http.Handler {
	opts = serverOptions(buildOptions(conn.Server, opts), opts) // one outbound budget for all its connections
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		wc, err := websocket.Accept(w, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return // Accept answered the client
		}
		if o := buildOptions(conn.Server, opts); o.resume != nil {
			serveResumableWS(ctx, wc, req.TLS, r, opts)
			return
		}
		c, err := start(ctx, newWSTransport(wc), conn.Server, append([]Option{WithResponder(r)}, opts...))
		if err != nil {
			return
		}
		<-c.Done()
	})
}

// ServeWebSocket serves RSocket over WebSocket at path on ln until ctx
// ends; with WithTLS, over TLS (wss://).
func ServeWebSocket(ctx context.Context, ln net.Listener, path string, r Responder, opts ...Option) error {
	o := buildOptions(conn.Server, opts)
	if o.err != nil {
		return o.err
	}
	if o.tls != nil {
		// http.Server handshakes *tls.Conn itself, within ReadHeaderTimeout;
		// no ALPN is offered, so clients stay on HTTP/1.1 as WebSocket needs.
		ln = tls.NewListener(ln, o.tls.Clone())
	}
	mux := http.NewServeMux()
	mux.Handle(path, WebSocketHandler(ctx, r, opts...))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: tlsHandshakeTimeout,
		// Failed handshakes and bad requests are the client's problem: log
		// them at debug through our logger, not on the process's stderr.
		ErrorLog: slog.NewLogLogger(o.log.Handler(), slog.LevelDebug)}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Listen parses tcp://, tls://HOST:PORT or ws://, wss://HOST:PORT/PATH and
// listens on its address, returning the listener and the WebSocket path
// ("" for TCP and TLS). The listener is plain TCP: pass WithTLS to Serve
// or ServeWebSocket for tls:// and wss://.
func Listen(rawURL string) (net.Listener, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(rawURL, "://") {
		// "127.0.0.1:7878" parses badly ("first path segment in URL
		// cannot contain colon"); say what is wanted instead.
		return nil, "", fmt.Errorf("rsocket: bad URL %q: want tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH", rawURL)
	}
	switch u.Scheme {
	case "tcp", "tls":
		ln, err := net.Listen("tcp", u.Host)
		return ln, "", err
	case "ws", "wss":
		path := u.Path
		if path == "" {
			path = "/"
		}
		ln, err := net.Listen("tcp", u.Host)
		return ln, path, err
	}
	return nil, "", fmt.Errorf("rsocket: URL %q: scheme must be tcp, tls, ws or wss", rawURL)
}
