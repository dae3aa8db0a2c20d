// Package rsocket is the user-facing RSocket API of sluice: Dial and Serve
// over TCP (24-bit length-prefixed frames), WebSocket (one frame per binary
// message) and any net.Conn (net.Pipe for in-memory tests), with the four
// interaction models, fire-and-forget's and metadata push's one-way sends,
// and a Responder that serves them.
//
// Every connection runs the pure state machine rsocket/conn.Machine under
// one mutex, taken by whichever goroutine has work: the reader with every
// frame already buffered, an application call or a handler's answer (they
// queue a command and run the queue if the mutex is free, so under load
// one holder runs a batch of them), the timer that follows
// Machine.NextDeadline. One writer goroutine writes everything queued in
// one write; nobody else waits on a write, so the reader never blocks in
// a write to a slow peer (both ends blocked writing while neither reads
// would deadlock). What the peer does not read is bounded instead:
// past the outbound budget the reader stops reading (WithOutboundBudget,
// WithServerOutboundBudget), and a peer that accepts nothing for the
// write timeout is dropped (WithWriteTimeout).
//
// Both ends can request and respond: a client passes WithResponder to Dial,
// a server gets each *Conn through WithOnConnect.
package rsocket

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// Payload is one RSocket payload. Metadata nil means "no metadata".
type Payload struct {
	Metadata []byte
	Data     []byte
}

// Error is an ERROR frame on a stream (or the stream's failure when the
// connection ended).
type Error struct {
	Code    frame.ErrorCode
	Message string
	// cause: a *NotRSocketError, for the streams of a connection whose
	// peer did not speak RSocket (foreign.go).
	cause error
}

func (e *Error) Error() string { return "rsocket: " + e.Code.String() + ": " + e.Message }

// Unwrap is a *NotRSocketError when the connection failed because its
// peer does not speak RSocket, else nil.
func (e *Error) Unwrap() error { return e.cause }

// ApplicationError returns an ERROR[APPLICATION_ERROR] for a handler to return.
func ApplicationError(format string, args ...any) *Error {
	return &Error{Code: frame.ErrorCodeApplicationError, Message: fmt.Sprintf(format, args...)}
}

// ErrClosed: the connection is closed. It is conn.ErrClosed, so that
// errors.Is finds it whether the driver or its machine saw the close first.
var ErrClosed = conn.ErrClosed

// Responder answers the requests of the peer. Handlers run on their own
// goroutine; ctx ends when the peer cancels, the stream fails or the
// connection closes. Embed UnimplementedResponder to answer only some.
type Responder interface {
	// RequestResponse returns the one response (or an error, sent as ERROR:
	// *Error keeps its code, anything else is APPLICATION_ERROR).
	RequestResponse(ctx context.Context, p Payload) (Payload, error)
	// FireAndForget handles a request that gets no answer.
	FireAndForget(ctx context.Context, p Payload)
	// MetadataPush handles a METADATA_PUSH.
	MetadataPush(ctx context.Context, metadata []byte)
	// RequestStream sends the stream's elements on out (Send blocks until
	// the requester grants credits). Returning nil completes the stream,
	// an error ends it with ERROR.
	RequestStream(ctx context.Context, p Payload, out *Sink) error
	// RequestChannel gets the requester's first payload p, its further
	// payloads from in (io.EOF when it completes) and sends on out;
	// returning nil completes our half, an error ends the channel.
	RequestChannel(ctx context.Context, p Payload, in *Stream, out *Sink) error
}

// NonBlocking marks a Responder whose RequestResponse never blocks: no
// I/O, no locks held for long, no waiting on other requests. Such a
// handler runs inline on the connection's reader goroutine, while the
// reader holds the connection, so an answer costs no goroutine wake-up
// and no copy of the request (rsocket/echo is one). The price is the
// contract: a handler that blocks stalls every stream of the connection,
// and p's slices are valid only during the call (copy what you keep; the
// answer may be p itself). Its ctx never ends during the call. Other
// models (stream, channel, fire-and-forget, metadata push) still run on
// pooled goroutines. WithInlineHandlers opts in without the marker.
//
// Beware of embedding: a wrapper type that embeds a NonBlocking responder
// by its concrete type (struct{ *echo.Responder; … }) inherits the marker
// even when its own RequestResponse blocks. Embed the Responder interface
// instead, which promotes only the Responder methods.
type NonBlocking interface {
	Responder
	NonBlocking()
}

// UnimplementedResponder rejects every request; embed it to implement some.
type UnimplementedResponder struct{}

var errUnimplemented = &Error{Code: frame.ErrorCodeRejected, Message: "not implemented"}

func (UnimplementedResponder) RequestResponse(context.Context, Payload) (Payload, error) {
	return Payload{}, errUnimplemented
}
func (UnimplementedResponder) FireAndForget(context.Context, Payload) {}
func (UnimplementedResponder) MetadataPush(context.Context, []byte)   {}
func (UnimplementedResponder) RequestStream(context.Context, Payload, *Sink) error {
	return errUnimplemented
}
func (UnimplementedResponder) RequestChannel(context.Context, Payload, *Stream, *Sink) error {
	return errUnimplemented
}

// WithInlineHandlers runs the responder's RequestResponse inline on the
// reader goroutine, as for a NonBlocking responder (read its contract: a
// blocking handler stalls the connection).
func WithInlineHandlers() Option { return func(o *options) { o.inline = true } }

// Option configures a connection (Dial, Serve, ClientConn, ServeConn).
type Option func(*options)

type options struct {
	cfg       conn.Config
	responder Responder
	onConnect func(*Conn)
	log       *slog.Logger
	leaseTTL  time.Duration
	leaseN    uint32
	lease     bool
	channelN  uint32
	// releasedChannels: a responder's channels recycle their payloads'
	// buffers from the start (WithReleasedChannels).
	releasedChannels bool
	err              error // an invalid option; Dial, Serve and the like return it
	// directWrite replaces unlock's one attempt on the socket (nil:
	// rawSock.tryWrite): tests act in the window between the attempt and
	// the relock (withDirectWrite).
	directWrite func(*rawSock, []byte) (int, error)
	inline      bool        // RequestResponse runs on the reader, see NonBlocking
	tls         *tls.Config // transport.go: tls:// and wss:// dials, TLS listeners
	resume      *resumeOptions

	outBudget    int64         // WithOutboundBudget
	serverOut    int64         // WithServerOutboundBudget
	sharedOut    *outBudget    // the server's, shared by its connections (Serve sets it)
	writeTimeout time.Duration // WithWriteTimeout; 0: none
	// The server's deadlines for the first frame and within a frame
	// (deadlines.go); zero: the defaults.
	setupTimeout time.Duration
	frameStall   time.Duration
}

func buildOptions(role conn.Role, opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler), channelN: 64, leaseTTL: 30 * time.Second, leaseN: frame.MaxRequestN,
		outBudget: DefaultOutboundBudget, serverOut: DefaultServerOutboundBudget, writeTimeout: DefaultWriteTimeout}
	o.cfg.Role = role
	for _, f := range opts {
		f(&o)
	}
	o.cfg.Lease = o.lease // client: L in SETUP; server: accepts L (else UNSUPPORTED_SETUP)
	// The reader dispatches a frame's events before it reads the next
	// (readLoop), so the machine may lend it the frame's bytes: the
	// driver's copy for the application (inboundPayload) is then the
	// only one.
	o.cfg.LendFrames = true
	return o
}

// WithResponder sets the Responder for the peer's requests (default: reject all).
func WithResponder(r Responder) Option { return func(o *options) { o.responder = r } }

// WithSetup sets the client's SETUP payload.
func WithSetup(metadata, data []byte) Option {
	return func(o *options) { o.cfg.SetupMetadata, o.cfg.SetupData = metadata, data }
}

// WithMIME sets the client's metadata and data MIME types (SETUP).
func WithMIME(metadata, data string) Option {
	return func(o *options) { o.cfg.MetadataMIME, o.cfg.DataMIME = metadata, data }
}

// WithKeepalive sets the client's keepalive interval and max lifetime.
func WithKeepalive(interval, lifetime time.Duration) Option {
	return func(o *options) { o.cfg.KeepaliveInterval, o.cfg.MaxLifetime = interval, lifetime }
}

// WithLease: a client asks for lease in SETUP; a server accepts clients
// that ask (without it, such a SETUP is refused with UNSUPPORTED_SETUP).
// Both ends then grant the peer leases of count requests per ttl, renewed
// at half the ttl, and again right after a resume (a lease does not
// survive the transport). A request with no lease allowing it waits for
// the next LEASE; a lease whose ttl passed allows nothing.
func WithLease(ttl time.Duration, count uint32) Option {
	return func(o *options) { o.lease, o.leaseTTL, o.leaseN = true, ttl, count }
}

// WithMaxPayloadSize bounds one inbound payload, whole or reassembled
// (metadata plus data); default 64 MiB (conn.DefaultMaxPayloadSize). A
// request over it is answered ERROR[INVALID] and never reaches the
// handler; a response or stream element over it fails the stream.
func WithMaxPayloadSize(n int) Option { return func(o *options) { o.cfg.MaxPayloadSize = n } }

// WithMaxFrameSize bounds the frames this end sends; larger payloads are fragmented.
func WithMaxFrameSize(n int) Option { return func(o *options) { o.cfg.MaxFrameSize = n } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithOnConnect is called with each new connection (server: after SETUP),
// so the application can also send requests to the peer.
func WithOnConnect(f func(*Conn)) Option { return func(o *options) { o.onConnect = f } }

// WithReleasedChannels declares that the responder's RequestChannel
// handlers give the payloads of their channels back (Stream.Release), so
// that a channel's payloads come in recycled buffers from its first one
// on, before its handler runs (Release of an empty Payload declares it
// from the handler, once it runs). For servers whose channels carry
// large payloads, such as file uploads.
func WithReleasedChannels() Option { return func(o *options) { o.releasedChannels = true } }

// WithChannelCredits sets the REQUEST_N batch a responder grants the
// requester of a channel (default 64), at once when the channel opens and
// again as the handler consumes. n must be in 1..2^31-1: "a Responder
// MUST respond to an initial REQUEST_CHANNEL frame with a REQUEST_N frame"
// (Protocol.md "Request Channel"), so 0 (no REQUEST_N until the handler
// asks) is refused: Dial, Serve and the like return an error.
func WithChannelCredits(n uint32) Option {
	return func(o *options) {
		if n == 0 || n > frame.MaxRequestN {
			o.err = fmt.Errorf("rsocket: WithChannelCredits(%d): must be in 1..2^31-1 (a channel's responder must answer REQUEST_CHANNEL with REQUEST_N)", n)
			return
		}
		o.channelN = n
	}
}

// Defaults of the outbound bounds (WithOutboundBudget,
// WithServerOutboundBudget, WithWriteTimeout).
const (
	DefaultOutboundBudget       = 4 << 20
	DefaultServerOutboundBudget = 128 << 20
	DefaultWriteTimeout         = 30 * time.Second
)

// WithOutboundBudget bounds the bytes a connection queues for its peer
// and has not written yet (the write in flight included); default 4 MiB
// (DefaultOutboundBudget), n <= 0 keeps it. While the output the peer's
// frames caused (KEEPALIVE echoes, answers, responder streams' elements,
// and what is queued before them) is over it, the connection stops
// reading the peer's frames (TCP then pushes back on the peer); while the
// whole queue is over it, Sink.Send, Channel.Send and request-response
// answers wait. So a peer that sends requests or KEEPALIVEs and never
// reads costs at most the budget plus about one frame. Our own requests
// do not stop the reader, so two ends sending each other large requests
// at once keep reading each other's answers.
//
// The trade-off: a small budget makes a burst larger than it alternate
// between reading and writing, and two ends that each answer the other
// with more than their budget at once both stop reading until one end's
// write timeout drops the connection. Raise it for such traffic.
func WithOutboundBudget(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.outBudget = int64(n)
		}
	}
}

// WithServerOutboundBudget bounds the output queued by all the
// connections of one Serve, ServeWebSocket or WebSocketHandler call
// together; default 128 MiB (DefaultServerOutboundBudget), n <= 0 keeps
// it. The budgets count the memory holding the output (a pooled buffer's
// whole capacity), not only its bytes; 128 MiB rather than 256 so that
// the budget, the buffers every connection keeps (about 200 KiB each) and
// the pool of free buffers (frame.MaxPooledBytes) stay within 256 MiB
// under 100 flooding connections (docs/rsocket.md, "Hostile clients"). While the sum is over it, a connection with output queued stops
// reading (and its Sends wait) until that output is written, as over its
// own budget; a connection with nothing queued reads on. The sum thus
// stays within the budget plus about one frame per connection, and a
// peer that reads its answers is slowed by at most its own writes. It
// has no effect on Dial, ClientConn or a lone ServeConn.
func WithServerOutboundBudget(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.serverOut = n
		}
	}
}

// WithWriteTimeout closes a connection whose peer accepted no byte of
// pending output for d (default 30 s, DefaultWriteTimeout; d <= 0: no
// limit). The transport is closed, every stream fails and Err is
// ErrWriteTimeout; a resumable connection resumes as after any broken
// transport. Progress is measured per write of at most 256 KiB (per
// frame on WebSocket), so a slow reader is not a stalled one.
func WithWriteTimeout(d time.Duration) Option {
	return func(o *options) {
		o.writeTimeout = max(d, 0)
	}
}

// ErrWriteTimeout: the peer accepted no output for the write timeout
// (WithWriteTimeout) and the connection was closed.
var ErrWriteTimeout = errors.New("rsocket: peer accepted no output for the write timeout")

// outBudget is a server's outbound budget and the bytes its connections
// have queued together (each adds its changes, account).
type outBudget struct {
	limit int64
	total atomic.Int64 // queued output, held requests and frames being read (readbudget.go); change it with add
	// Readers waiting for room for a large frame (readBudget.reserve):
	// freed, under mu, is closed when the total falls below the limit
	// while some wait; overdraw is the slot of the one reader that may
	// read its frame to the end over the limit.
	waiting  atomic.Int32
	mu       sync.Mutex
	freed    chan struct{}
	overdraw atomic.Bool
}

func newOutBudget(limit int64) *outBudget { return &outBudget{limit: limit} }

// withOutBudget makes a connection count its output against b.
func withOutBudget(b *outBudget) Option { return func(o *options) { o.sharedOut = b } }

// serverOptions appends to opts the budget shared by one server's
// connections.
func serverOptions(o options, opts []Option) []Option {
	return append(opts[:len(opts):len(opts)], withOutBudget(newOutBudget(o.serverOut)))
}

// toError maps a handler's error to a stream error code and message.
func toError(err error) (frame.ErrorCode, string) {
	var e *Error
	if errors.As(err, &e) && e.Code != frame.ErrorCodeReserved && !e.Code.IsConnectionScoped() && e.Code != frame.ErrorCodeReservedExtension {
		return e.Code, e.Message
	}
	return frame.ErrorCodeApplicationError, err.Error()
}
