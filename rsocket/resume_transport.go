package rsocket

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/rsocket/conn"
)

// dialResumable is Dial with WithResume: the same dial, kept to redial.
func dialResumable(ctx context.Context, rawURL string, u *url.URL, o options, opts []Option) (*Conn, error) {
	return startClientResumable(ctx, o, opts, func(ctx context.Context) (transport, error) { return dialTransport(ctx, rawURL, u, o) })
}

// ClientConnResumable runs the client end of a resumable connection over
// byte streams that dial makes: one now, and another each time one breaks
// (with WithResume's backoff, until the session resumes, is rejected or
// expires). It is ClientConn for callers that set up each connection
// themselves (their own TLS, their own peer checks); WithResume is
// implied.
func ClientConnResumable(ctx context.Context, dial func(context.Context) (net.Conn, error), opts ...Option) (*Conn, error) {
	o := buildOptions(conn.Client, opts)
	if o.resume == nil {
		opts = append(opts[:len(opts):len(opts)], WithResume(ResumeConfig{}))
		o = buildOptions(conn.Client, opts)
	}
	return startClientResumable(ctx, o, opts, func(ctx context.Context) (transport, error) {
		nc, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return newStreamTransport(nc), nil
	})
}

// startClientResumable dials the first transport and starts a resumable
// client session that redials with dial.
func startClientResumable(ctx context.Context, o options, opts []Option, dial func(context.Context) (transport, error)) (*Conn, error) {
	tr, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	token := o.resume.cfg.Token
	if token == nil {
		token = newResumeToken()
	}
	opts = append(opts[:len(opts):len(opts)], func(o *options) { o.cfg.ResumeToken = token })
	return startResumable(context.WithoutCancel(ctx), tr, conn.Client, opts, nil, "", dial)
}

// ServeConnResumable serves one accepted connection of a resumable server
// (opts include WithResume, the same Option value for every connection,
// so that they share its store): its first frame is a SETUP, which starts
// a session whose requests carry ctx, or a RESUME, which moves a session
// of the store onto this connection (the session keeps the ctx of the
// connection that started it: the resume token, a 16-byte secret, is the
// credential, and with TLS client certificates the client's identity
// must match the SETUP's, ResumeConfig.PeerIdentity). It returns once
// that frame was handled, or the connection sent none within 10 s.
func ServeConnResumable(ctx context.Context, nc net.Conn, r Responder, opts ...Option) {
	serveResumableConn(ctx, nc, r, opts)
}

// serveResumableConn serves an accepted connection of a resumable TCP
// listener (Serve with WithResume); it runs on its own goroutine, since
// it waits for the first frame.
func serveResumableConn(ctx context.Context, nc net.Conn, r Responder, opts []Option) {
	var tlsState *tls.ConnectionState
	if tc, ok := nc.(*tls.Conn); ok {
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = tc.Close()
			return
		}
		st := tc.ConnectionState()
		tlsState = &st
	}
	tr := newServerStreamTransport(nc)
	o := buildOptions(conn.Server, opts)
	tr.r.stall.d = o.frameStallOrDefault()
	serveResumable(ctx, tr, func() ([]byte, error) {
		// A timer, not a read deadline: the reader sets its own while a
		// frame is partial (deadlines.go), and the first frame's bound
		// is on its whole time.
		t := time.AfterFunc(o.setupTimeoutOrDefault(), func() { _ = nc.Close() })
		f, err := tr.readFrame(nil)
		if !t.Stop() && err == nil {
			err = errNoSetup // closed as the frame came: it is gone with the connection
		}
		return f, err
	}, tlsState, r, opts)
}

// serveResumableWS serves a WebSocket of a resumable handler. The HTTP
// handler returns once this transport is closed, whether the session
// lives on over another one or not.
func serveResumableWS(ctx context.Context, wc *websocket.Conn, tlsState *tls.ConnectionState, r Responder, opts []Option) {
	t := &closeWatch{transport: newWSTransport(wc), done: make(chan struct{})}
	ws := t.transport.(*wsTransport)
	o := buildOptions(conn.Server, opts)
	ws.stallD = o.frameStallOrDefault()
	serveResumable(ctx, t, func() ([]byte, error) {
		rctx, cancel := context.WithTimeout(ctx, o.setupTimeoutOrDefault())
		defer cancel()
		prev := ws.ctx
		ws.ctx = rctx
		defer func() { ws.ctx = prev }()
		return ws.readFrame(nil)
	}, tlsState, r, opts)
	<-t.done
}

// closeWatch is a transport whose Close is observable.
type closeWatch struct {
	transport
	once sync.Once
	done chan struct{}
}

func (t *closeWatch) Close() error {
	err := t.transport.Close()
	t.once.Do(func() { close(t.done) })
	return err
}
