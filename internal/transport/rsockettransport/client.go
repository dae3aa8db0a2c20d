package rsockettransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/extension"
)

// Session kinds: the first byte of a channel's opening metadata.
const (
	kindSend byte = 'S'
	kindRead byte = 'R'
)

// Window is the REQUEST_N batch each end grants the other on a session's
// channel (topped up as frames are consumed, see rsocket.Stream). It is a
// backstop, not the flow control: the protocol's own credits (Welcome,
// Credit) bound what an agent has in flight, far below this, so RSocket
// credits never hold a frame back that the protocol allows; they only
// bound what a receiver that stopped reading can have queued.
const Window = 1024

// MetadataMIME and DataMIME are what SETUP declares: a frame's header
// (see Encode) travels as a payload's metadata, its bulk bytes as data.
const (
	MetadataMIME = "application/x.sluice.frame.v1"
	DataMIME     = "application/octet-stream"
)

// ErrTokenWithoutTLS refuses a bearer token on a plaintext connection.
var ErrTokenWithoutTLS = errors.New("a token without TLS would travel in clear text")

// Option configures a Dialer or Serve.
type Option func(*options)

type options struct {
	tls                  *tls.Config
	token                string
	allowTokenWithoutTLS bool
	keepalive, lifetime  time.Duration
	resume               bool
}

// WithResume makes connections resumable (docs/rsocket-resume.md): on a
// Dialer, a broken connection is dialled again and its sessions go on
// where they were, nothing resent; on Serve, sessions survive a broken
// connection until the client resumes them (or the session lifetime,
// 60 s, passes). Both ends need it.
func WithResume() Option { return func(o *options) { o.resume = true } }

// WithTLS encrypts the connection: on a Dialer, the client's config (with
// a client certificate, it identifies the agent); on Serve, the server's.
// Only tcp URLs: wss uses the system's roots (rsocket.Dial).
func WithTLS(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// WithToken sends token as a bearer token (RSocket authentication
// extension) on every session. Without TLS it is refused unless
// AllowTokenWithoutTLS (loopback tests).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// AllowTokenWithoutTLS lets a token travel in clear text.
func AllowTokenWithoutTLS() Option { return func(o *options) { o.allowTokenWithoutTLS = true } }

// WithKeepalive sets the client's KEEPALIVE interval and the silence
// after which the connection is declared dead (ending its sessions with
// a retryable error; the next session redials).
func WithKeepalive(interval, lifetime time.Duration) Option {
	return func(o *options) { o.keepalive, o.lifetime = interval, lifetime }
}

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Dialer opens sessions over one RSocket connection to a sink, shared by
// every session and dialled again when it died: sessions are streams, so
// a Send session and reads cost no connection each.
type Dialer struct {
	url  *url.URL
	o    options
	open []byte // the opening metadata after the kind byte: auth

	mu     sync.Mutex
	conn   *rsocket.Conn
	peer   protocol.PeerInfo
	closed bool
}

// NewDialer makes a Dialer for tcp://HOST:PORT or ws://HOST:PORT/PATH
// (wss too). It does not connect: the first session does.
func NewDialer(rawURL string, opts ...Option) (*Dialer, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("rsocket sink %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "tcp", "ws", "wss":
	default:
		return nil, fmt.Errorf("rsocket sink %q: scheme must be tcp, ws or wss", rawURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("rsocket sink %q: no HOST:PORT", rawURL)
	}
	o := buildOptions(opts)
	if u.Scheme == "ws" && o.tls != nil {
		return nil, fmt.Errorf("rsocket sink %q: TLS over WebSocket is wss://", rawURL)
	}
	secure := o.tls != nil || u.Scheme == "wss"
	d := &Dialer{url: u, o: o}
	if o.token != "" {
		if !secure && !o.allowTokenWithoutTLS {
			return nil, ErrTokenWithoutTLS
		}
		d.open = extension.AppendAuthBearer(nil, o.token)
	}
	return d, nil
}

// String is the sink's URL, for logs.
func (d *Dialer) String() string { return d.url.String() }

// Close closes the connection; sessions end, and later ones fail.
func (d *Dialer) Close() error {
	d.mu.Lock()
	c := d.conn
	d.conn, d.closed = nil, true
	d.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}

// connect returns the live connection, dialling one if there is none or
// it died.
func (d *Dialer) connect(ctx context.Context) (*rsocket.Conn, protocol.PeerInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, protocol.PeerInfo{}, &protocol.SessionError{Status: protocol.StatusCanceled, Msg: "rsocket dialer closed"}
	}
	if d.conn != nil {
		select {
		case <-d.conn.Done():
		default:
			return d.conn, d.peer, nil
		}
	}
	opts := []rsocket.Option{rsocket.WithMIME(MetadataMIME, DataMIME)}
	if d.o.keepalive > 0 {
		opts = append(opts, rsocket.WithKeepalive(d.o.keepalive, d.o.lifetime))
	}
	pi := protocol.PeerInfo{Addr: d.url.Host}
	var c *rsocket.Conn
	var err error
	if d.url.Scheme == "tcp" {
		var nc net.Conn
		nc, err = d.dialTCP(ctx)
		if tc, ok := nc.(*tls.Conn); ok && err == nil {
			st := tc.ConnectionState()
			pi.TLS = &st
		}
		if err == nil && d.o.resume {
			// The first connection is nc; each broken one is replaced
			// by the same dial (TCP, then the TLS handshake).
			first := nc
			c, err = rsocket.ClientConnResumable(ctx, func(ctx context.Context) (net.Conn, error) {
				if c := first; c != nil {
					first = nil
					return c, nil
				}
				return d.dialTCP(ctx)
			}, opts...)
		} else if err == nil {
			c, err = rsocket.ClientConn(context.WithoutCancel(ctx), nc, opts...)
		}
	} else {
		if d.o.resume {
			opts = append(opts, rsocket.WithResume(rsocket.ResumeConfig{}))
		}
		c, err = rsocket.Dial(ctx, d.url.String(), opts...)
	}
	if err != nil {
		// Unreachable is about the moment: retryable.
		return nil, pi, &protocol.SessionError{Status: protocol.StatusUnavailable, Msg: fmt.Sprintf("rsocket dial %s: %v", d.url, err)}
	}
	d.conn, d.peer = c, pi
	return c, pi, nil
}

// dialTCP dials the sink again for a resumable connection: TCP, then TLS
// when configured.
func (d *Dialer) dialTCP(ctx context.Context) (net.Conn, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, "tcp", d.url.Host)
	if err != nil || d.o.tls == nil {
		return nc, err
	}
	cfg := d.o.tls
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		cfg = cfg.Clone()
		cfg.ServerName = d.url.Hostname()
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// forget drops c if it is still the current connection, so the next
// session dials again.
func (d *Dialer) forget(c *rsocket.Conn) {
	d.mu.Lock()
	if d.conn == c {
		d.conn = nil
	}
	d.mu.Unlock()
	_ = c.Close()
}

// Send opens a Send session; ctx bounds its life (cancel it to end it).
func (d *Dialer) Send(ctx context.Context) (protocol.Conn, error) { return d.session(ctx, kindSend) }

// Read opens a Read session.
func (d *Dialer) Read(ctx context.Context) (protocol.Conn, error) { return d.session(ctx, kindRead) }

// session opens the channel. The first payload only says which session
// and who we are, so that opening fails fast when the sink is down (as a
// gRPC stream does) and the protocol's first frame is an ordinary one.
// A connection found dead on opening is dialled again once.
func (d *Dialer) session(ctx context.Context, kind byte) (protocol.Conn, error) {
	md := append([]byte{kind}, d.open...)
	for attempt := 0; ; attempt++ {
		c, pi, err := d.connect(ctx)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithCancel(ctx)
		ch, err := c.RequestChannel(sctx, rsocket.Payload{Metadata: md}, Window)
		if err != nil {
			cancel()
			if errors.Is(err, rsocket.ErrClosed) && attempt == 0 {
				d.forget(c)
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, sessionError(err)
		}
		// The session's context ends with the connection too.
		go func() {
			select {
			case <-c.Done():
				cancel()
			case <-sctx.Done():
			}
		}()
		return &clientConn{ch: ch, ctx: sctx, parent: ctx, cancel: cancel, peer: pi, d: d, conn: c}, nil
	}
}

// clientConn is the requester's end of a session's channel.
type clientConn struct {
	ch     *rsocket.Channel
	ctx    context.Context
	parent context.Context // the caller's: only its end is a cancel
	cancel context.CancelFunc
	peer   protocol.PeerInfo
	hdr    []byte                // reused: Send waits until the frame is encoded
	ended  atomic.Pointer[error] // how the sink ended the session, once Recv saw it
	closed atomic.Bool           // Close was called: errors after it are our cancel
	heard  atomic.Bool           // Recv returned a frame or the sink's end
	d      *Dialer
	conn   *rsocket.Conn
}

func (c *clientConn) Send(f protocol.Frame) error {
	hdr, body, err := Encode(c.hdr[:0], f)
	if err != nil {
		return err
	}
	c.hdr = hdr[:0]
	if err := c.ch.Send(rsocket.Payload{Metadata: hdr, Data: body}); err != nil {
		// The channel is over; its real status (PermissionDenied from
		// the sink, say) is what Recv saw, if it saw it already.
		if e := c.ended.Load(); e != nil {
			return *e
		}
		if c.closed.Load() {
			return context.Canceled
		}
		return c.sessionError(err)
	}
	return nil
}

// sessionError is sessionError, except that the session's own context
// ending because its connection died (session's watcher cancels it) is
// Unavailable, which is retried, not the caller's Canceled.
func (c *clientConn) sessionError(err error) error {
	if c.parent.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return &protocol.SessionError{Status: protocol.StatusUnavailable, Msg: "connection lost: " + err.Error()}
	}
	return sessionError(err)
}

func (c *clientConn) Recv() (protocol.Frame, error) {
	p, err := c.ch.Next()
	if err == nil || err == io.EOF {
		c.heard.Store(true)
	}
	if err != nil {
		if err == io.EOF {
			return nil, err
		}
		if e := c.ended.Load(); e != nil {
			return nil, *e
		}
		var re *rsocket.Error
		if c.closed.Load() && !errors.As(err, &re) {
			return nil, context.Canceled // we ended it
		}
		if errors.As(err, &re) {
			c.heard.Store(true) // the sink ended it: the connection works
		}
		err = c.sessionError(err)
		c.ended.Store(&err)
		c.cancel()
		return nil, err
	}
	f, err := Decode(p.Metadata, p.Data)
	if err != nil {
		err = &protocol.SessionError{Status: protocol.StatusInvalid, Msg: "from the sink: " + err.Error()}
		c.ended.Store(&err)
		c.cancel()
		return nil, err
	}
	return f, nil
}

func (c *clientConn) CloseSend() error {
	if err := c.ch.Complete(); err != nil {
		return c.sessionError(err)
	}
	return nil
}

// Close sends CANCEL: the sink's handler sees Canceled. A session given
// up before the sink said anything (the agent's handshake timeout) also
// condemns its connection: it may be half-open (a NAT entry dropped, a
// peer gone without a FIN), and reusing it would send every retry into
// the void until keepalive noticed; the next session dials afresh. Other
// sessions on that connection fail with Unavailable and are retried.
func (c *clientConn) Close(error) {
	c.closed.Store(true)
	c.cancel()
	if !c.heard.Load() && c.d != nil {
		c.d.forget(c.conn)
	}
}

func (c *clientConn) Context() context.Context { return c.ctx }
func (c *clientConn) Peer() protocol.PeerInfo  { return c.peer }

// PayloadsOwned: a received payload is the RSocket connection's copy of
// the frame's bytes, never reused, so a receiver may keep it.
func (c *clientConn) PayloadsOwned() bool { return true }
