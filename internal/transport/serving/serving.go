// Package serving is what a transport's server needs from the service it
// carries, beyond protocol.Service: the service's limits and timeouts for
// connections, its hooks for admitting them and for shutting down, and the
// metrics the server counts into. The sink fills a Host (sink.Sink.Serving);
// the gRPC server (internal/transport/grpctransport/grpcserve) takes one, so
// that neither knows the other: the sink stays free of transports and the
// server free of the sink's domain.
package serving

import (
	"crypto/tls"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/protocol"
)

// Host is a service and what a server carrying it must honour. Every
// field is set by the service (sink.Sink.Serving), defaults applied.
type Host struct {
	Service protocol.Service
	Logger  *slog.Logger

	// TLS, if not nil, serves over TLS; Tokens, if not nil, requires a
	// bearer token on every call. Authenticated says whether the service
	// knows who its clients are (tokens or mutual TLS): without it a
	// non-loopback listener is warned about.
	TLS           *tls.Config
	Tokens        *auth.Tokens
	Authenticated bool

	// MaxMessageBytes is the largest batch the service accepts (the
	// receive limit is derived from it); MaxMessageBytesLimit the largest
	// it may be configured to (the send limit).
	MaxMessageBytes, MaxMessageBytesLimit int64
	// MaxStreamsPerConn caps the concurrent streams of one connection.
	MaxStreamsPerConn int
	// HandshakeTimeout, KeepaliveTime and KeepaliveTimeout: see
	// sink.Config. StallTimeout: how long a stream may hold an incomplete
	// message without progress before its connection is closed.
	HandshakeTimeout, KeepaliveTime, KeepaliveTimeout, StallTimeout time.Duration

	// Admit counts a newly accepted connection against the service's
	// connection caps and returns it (possibly wrapped), or false when it
	// must be closed (the service counted and logged the refusal).
	Admit func(net.Conn) (net.Conn, bool)
	// ConsumerRefusal, if set, is the error a Read stream from the
	// address remote would be refused with now (the service's consumer
	// shares), counted as a refusal, or nil: a server that can refuses
	// the stream with it before starting a handler for it. The service
	// still admits each stream it serves itself.
	ConsumerRefusal func(remote string) error
	// NoteError records a failure for the service's status page.
	NoteError func(format string, args ...any)
	// Attach registers a server with the service, which stops it first
	// when it closes (gracefully, then cut after its shutdown timeout);
	// it returns an error once the service is closing.
	Attach func(Stopper) error
	// Closing is closed when the service begins to close.
	Closing <-chan struct{}

	// StalledConns counts the connections closed by the stall watch,
	// StreamCapReached those reaching MaxStreamsPerConn, WaitingRefused
	// the streams refused because their connection had the most streams
	// waiting for their first message (internal/firstmsg).
	StalledConns, StreamCapReached, WaitingRefused prometheus.Counter

	// StallTick and StallNow, if set, drive the stall watch instead of a
	// ticker and the monotonic clock; StallChecked runs after each look.
	// Tests use them to need no sleeps.
	StallTick    <-chan time.Time
	StallNow     func() time.Time
	StallChecked func()
}

// Stopper is a server the service stops when it closes.
type Stopper interface {
	// GracefulStop stops accepting and waits for the sessions to end.
	GracefulStop()
	// Stop cuts every connection.
	Stop()
}
