package grpctransport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/wire"
)

// ClientOptions are how an agent or a consumer reaches a sink over gRPC:
// everything gRPC-specific about the client side lives here, so the code
// above the transport configures a connection without importing gRPC.
// The zero value is a plaintext connection without keepalive.
type ClientOptions struct {
	// TLS, when set, encrypts the connection (and with a client
	// certificate, identifies the agent); nil is plaintext.
	TLS *tls.Config
	// Token is sent as "Authorization: Bearer TOKEN" on every session.
	// Without TLS it is refused unless AllowTokenWithoutTLS (loopback
	// tests): it would travel in clear text.
	Token                string
	AllowTokenWithoutTLS bool
	// KeepaliveTime is the idle time after which the client pings the
	// sink, KeepaliveTimeout how long a ping may go unanswered before the
	// connection is closed (which ends its sessions). Zero: no pings.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxRecvBytes bounds one received message (default gRPC's 4 MiB).
	MaxRecvBytes int
	// ReconnectMax bounds gRPC's own connect back-off (the wait before it
	// dials a sink that refused or dropped the last connection). gRPC's
	// default grows from 1 s to 120 s and sits under the caller's
	// back-off: after a 33 s outage an agent with --reconnect-max 5s took
	// 11.3 s to reconnect (issue 24). Zero: defaults.ReconnectMax.
	ReconnectMax time.Duration
	// Extra are more dial options, appended last (tests: a custom dialer).
	Extra []grpc.DialOption
}

// ErrTokenWithoutTLS refuses a bearer token on a plaintext connection.
var ErrTokenWithoutTLS = errors.New("a token without TLS would travel in clear text")

// DialOptions are o as gRPC dial options. The HTTP/2 windows are
// internal/wire's, the same as the sink's: with gRPC's defaults a stream
// is capped at window/RTT, far below a long fat link's capacity.
func (o ClientOptions) DialOptions() ([]grpc.DialOption, error) {
	opts := []grpc.DialOption{
		grpc.WithInitialWindowSize(wire.InitialWindowSize),
		grpc.WithInitialConnWindowSize(wire.InitialConnWindowSize),
		grpc.WithConnectParams(o.ConnectParams()),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(o.TLS)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.Token != "" {
		if o.TLS == nil && !o.AllowTokenWithoutTLS {
			return nil, ErrTokenWithoutTLS
		}
		opts = append(opts, grpc.WithPerRPCCredentials(NewBearer(o.Token, o.TLS == nil)))
	}
	if o.KeepaliveTime > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: o.KeepaliveTime, Timeout: o.KeepaliveTimeout}))
	}
	if o.MaxRecvBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.MaxRecvBytes)))
	}
	return append(opts, o.Extra...), nil
}

// MinConnectTimeout is the least time one connection attempt (TCP, TLS
// and HTTP/2 handshakes) is given: gRPC's default is 20 s.
const MinConnectTimeout = 10 * time.Second

// ConnectParams is gRPC's connect back-off for o: from at most a second,
// never longer than ReconnectMax, so the caller's reconnect bound is the
// real one.
func (o ClientOptions) ConnectParams() grpc.ConnectParams {
	return ConnectParams(o.ReconnectMax)
}

// ConnectParams is gRPC's connect back-off bounded by max (zero:
// defaults.ReconnectMax), for every gRPC client sluice ships.
func ConnectParams(max time.Duration) grpc.ConnectParams {
	if max <= 0 {
		max = defaults.ReconnectMax
	}
	b := backoff.DefaultConfig
	b.BaseDelay = min(b.BaseDelay, max)
	b.MaxDelay = max
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: MinConnectTimeout}
}

// Connect makes a client connection to the sink at addr (HOST:PORT) and
// returns its Dialer and the connection to close when done. gRPC connects
// lazily: an unreachable sink shows up as the first session's error, a
// malformed address here.
func Connect(addr string, o ClientOptions) (*Dialer, io.Closer, error) {
	if err := CheckAddr(addr); err != nil {
		return nil, nil, err
	}
	opts, err := o.DialOptions()
	if err != nil {
		return nil, nil, err
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("sink address %q: %w", addr, err)
	}
	return NewDialer(cc), cc, nil
}

// CheckAddr refuses a sink address gRPC would take and never reach, so
// that a typo is an error at start-up, not a client retrying for ever
// with "the sink is down or unreachable": HOST without a port (gRPC
// dials port 443), and a URL of another scheme (http://, tcp://: gRPC
// takes the whole URL for a host name). A gRPC resolver scheme (dns:,
// unix:, passthrough:, ipv4:, ipv6:) stays the user's choice.
func CheckAddr(addr string) error {
	for _, scheme := range []string{"dns:", "unix:", "unix-abstract:", "passthrough:", "ipv4:", "ipv6:"} {
		if strings.HasPrefix(addr, scheme) {
			return nil
		}
	}
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		return fmt.Errorf("sink address %q: %s:// is not a sink address: give HOST:PORT for gRPC, or rsocket+tcp://HOST:PORT where the client takes RSocket", addr, scheme)
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("sink address %q: want HOST:PORT (the port is required)", addr)
	}
	return nil
}
