package rsockettransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/extension"
	"github.com/sluicehq/sluice/rsocket/netaccept"
)

// handshakeTimeout bounds a TLS handshake on an accepted connection.
const handshakeTimeout = 10 * time.Second

// peerKey carries a connection's PeerInfo (address, TLS) in the context
// the RSocket connection gives its handlers.
type peerKey struct{}

// ServeURL listens on tcp://HOST:PORT or ws://HOST:PORT/PATH and serves
// svc there until ctx ends. ready, if not nil, is called with the
// listener's address once it listens (":0" picks a port).
func ServeURL(ctx context.Context, rawURL string, svc protocol.Service, ready func(net.Addr), opts ...Option) error {
	u, err := CheckListenURL(rawURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return fmt.Errorf("rsocket listen %q: %w", rawURL, err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	if u.Scheme == "ws" {
		path := u.Path
		if path == "" {
			path = "/"
		}
		return ServeWebSocket(ctx, ln, path, svc, opts...)
	}
	return Serve(ctx, ln, svc, opts...)
}

// Serve accepts RSocket connections over TCP on ln until ctx ends and
// serves each session of each connection with svc. With WithTLS the
// connections are TLS and the client certificate is in PeerInfo.
func Serve(ctx context.Context, ln net.Listener, svc protocol.Service, opts ...Option) error {
	o := buildOptions(opts)
	r := newResponder(svc)
	ropts := serverOptions(o)
	return netaccept.Serve(ctx, ln, func(nc net.Conn) error {
		go serveConn(ctx, nc, o.tls, o.resume, r, ropts)
		return nil
	})
}

// serveConn runs one accepted connection: the TLS handshake first (so
// the peer's certificate is known before any session), then RSocket.
func serveConn(ctx context.Context, nc net.Conn, cfg *tls.Config, resume bool, r rsocket.Responder, ropts []rsocket.Option) {
	pi := protocol.PeerInfo{Addr: nc.RemoteAddr().String(), Local: nc.LocalAddr().String()}
	if cfg != nil {
		tc := tls.Server(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return
		}
		st := tc.ConnectionState()
		pi.TLS, nc = &st, tc
	}
	if resume {
		rsocket.ServeConnResumable(context.WithValue(ctx, peerKey{}, pi), nc, r, ropts...)
		return
	}
	if _, err := rsocket.ServeConn(context.WithValue(ctx, peerKey{}, pi), nc, r, ropts...); err != nil {
		_ = nc.Close()
	}
}

// ServeWebSocket serves svc over RSocket over WebSocket at path on ln
// until ctx ends (TLS, if any, is the listener's).
func ServeWebSocket(ctx context.Context, ln net.Listener, path string, svc protocol.Service, opts ...Option) error {
	o := buildOptions(opts)
	r := newResponder(svc)
	ropts := serverOptions(o)
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, req *http.Request) {
		pi := protocol.PeerInfo{Addr: req.RemoteAddr, TLS: req.TLS}
		rsocket.WebSocketHandler(context.WithValue(ctx, peerKey{}, pi), r, ropts...).ServeHTTP(w, req)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: handshakeTimeout}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func serverOptions(o options) []rsocket.Option {
	opts := []rsocket.Option{rsocket.WithChannelCredits(Window)}
	if o.resume {
		// One Option value for every connection of this Serve: they
		// share its store of sessions.
		opts = append(opts, rsocket.WithResume(rsocket.ResumeConfig{}))
	}
	return opts
}

// responder serves the sessions: one REQUEST_CHANNEL each.
type responder struct {
	rsocket.UnimplementedResponder
	svc protocol.Service
}

func newResponder(svc protocol.Service) *responder { return &responder{svc: svc} }

func (r *responder) RequestChannel(ctx context.Context, p rsocket.Payload, in *rsocket.Stream, out *rsocket.Sink) error {
	if len(p.Metadata) == 0 {
		return streamError(protocol.Errorf(protocol.StatusInvalid, "a sluice session opens with its kind in the metadata"))
	}
	pi, _ := ctx.Value(peerKey{}).(protocol.PeerInfo)
	if len(p.Metadata) > 1 {
		a, err := extension.ParseAuth(p.Metadata[1:])
		if err != nil {
			return streamError(protocol.Errorf(protocol.StatusUnauthenticated, "authentication metadata: %v", err))
		}
		tok, ok := a.Bearer()
		if !ok {
			return streamError(protocol.Errorf(protocol.StatusUnauthenticated, "authentication %s: only bearer tokens are accepted", a.ID))
		}
		pi.Token = string(tok)
	}
	c := &serverConn{in: in, out: out, peer: pi}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	defer c.cancel(nil)
	var err error
	switch p.Metadata[0] {
	case kindSend:
		err = r.svc.ServeSend(c)
	case kindRead:
		err = r.svc.ServeRead(c)
	default:
		err = protocol.Errorf(protocol.StatusInvalid, "unknown session kind %q", p.Metadata[0])
	}
	if err != nil {
		slog.Debug("rsocket session ended", "peer", pi.Addr, "err", err)
	}
	return streamError(err)
}

// serverConn is the sink's end of a session. Ending it is returning from
// the handler (the returned error becomes the ERROR); Close cancels the
// context the handler watches, as with gRPC.
type serverConn struct {
	in     *rsocket.Stream
	out    *rsocket.Sink
	peer   protocol.PeerInfo
	ctx    context.Context
	cancel context.CancelCauseFunc
	hdr    []byte
}

func (c *serverConn) Send(f protocol.Frame) error {
	hdr, body, err := Encode(c.hdr[:0], f)
	if err != nil {
		return err
	}
	c.hdr = hdr[:0]
	if err := c.out.Send(rsocket.Payload{Metadata: hdr, Data: body}); err != nil {
		return c.recvError(err)
	}
	return nil
}

func (c *serverConn) Recv() (protocol.Frame, error) {
	p, err := c.in.Next()
	if err != nil {
		return nil, c.recvError(err)
	}
	f, err := Decode(p.Metadata, p.Data)
	if err != nil {
		return nil, &protocol.SessionError{Status: protocol.StatusInvalid, Msg: "from the agent: " + err.Error()}
	}
	return f, nil
}

// recvError: the agent's CANCEL is a cancel, not a broken connection.
func (c *serverConn) recvError(err error) error {
	if errors.Is(err, context.Canceled) {
		return &protocol.SessionError{Status: protocol.StatusCanceled, Msg: "the peer cancelled the session"}
	}
	return sessionError(err)
}

func (c *serverConn) CloseSend() error         { return nil } // the handler's return ends the stream
func (c *serverConn) Close(err error)          { c.cancel(err) }
func (c *serverConn) Context() context.Context { return c.ctx }
func (c *serverConn) Peer() protocol.PeerInfo  { return c.peer }

// PayloadsOwned: a received payload is the RSocket connection's copy of
// the frame's bytes, never reused, so a receiver may keep it.
func (c *serverConn) PayloadsOwned() bool { return true }

// CheckListenURL parses a listen URL: tcp://HOST:PORT or
// ws://HOST:PORT/PATH, a port required; a path or query on tcp:// (which
// would be ignored) is refused.
func CheckListenURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "ws") || u.Port() == "" || (u.Scheme == "tcp" && (u.Path != "" || u.RawQuery != "")) {
		return nil, fmt.Errorf("rsocket listen %q: want tcp://HOST:PORT or ws://HOST:PORT/PATH", rawURL)
	}
	return u, nil
}
