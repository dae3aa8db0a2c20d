// Package driver delivers the agent's spool to a sink: it owns the
// delivery.Sender and the session. The loop feeds the Sender every event
// and carries out its actions: the driver's goroutine steps frames from
// the sink, sessions won or lost and the clock; the spool writer steps
// the messages it spooled itself (Spooled), under the same lock. Per
// session, one goroutine receives frames and one writes messages, from
// memory or read back from the spool. The driver keeps no protocol timing
// of its own: the Sender keeps the resend, reconnect and progress
// deadlines, and the loop keeps one timer at the Sender's NextDeadline. (Two clocks are not the Sender's:
// the handshake deadline, which bounds a dial before there is a session,
// and the 100ms rate limit on persisting the acknowledged watermark.)
//
// The driver sees sinks only through protocol.Dialer: gRPC in production,
// memconn in tests and the simulation.
package driver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/protocol"
)

// Config is what the driver needs to know; the agent fills it from its
// own Config.
type Config struct {
	// Dialers and Addrs: connection attempt k uses Dialers[k mod n], and
	// Addrs[k mod n] names it in logs and metrics.
	Dialers []protocol.Dialer
	Addrs   []string
	// Dictionary is uploaded before the first message of a session that
	// uses it (Compression codec.ZstdDict) unless the sink has it.
	Dictionary  *codec.Dictionary
	Compression codec.Kind
	// MaxMessageBytes is the largest message this agent builds; a sink
	// that takes less is reported.
	MaxMessageBytes int
	// HandshakeTimeout bounds the wait for the Welcome (required).
	HandshakeTimeout time.Duration
	Logger           *slog.Logger
	// Now is the agent's clock in nanoseconds, the one spool.Spooled.At
	// uses.
	Now func() int64
	// SealKafka, when set, is told at every Welcome whether the sink asked
	// for messages sealed as Kafka records sections (Welcome.Codec is
	// protocol.CodecKafkaZstd): the agent seals new messages so from then
	// on, and stops when a later Welcome (another sink, after a failover)
	// does not ask for it. Called in the driver's goroutine.
	SealKafka func(on bool)
}

// Driver is a running delivery.
type Driver struct {
	cfg     Config
	log     *slog.Logger
	spool   *spool.Spool
	metrics *metrics.Metrics
	health  health
	ctx     context.Context
	connCh  chan connEvent
	done    chan struct{}

	// mu guards loop, which the driver's goroutine and the spool writer
	// (Spooled) step; stopped is set once the driver's goroutine returned.
	mu      sync.Mutex
	loop    *loop
	stopped bool

	// olderSinks holds the addresses of sinks that refused a Hello
	// carrying SentBelow as malformed (olderSink): their Hellos go
	// without it.
	olderSinks sync.Map
}

// Start delivers backlog (spooled before the start, not acknowledged)
// and then what Spooled is given, until ctx ends. s is the Sender,
// already holding the spool's watermark. The driver acknowledges the
// spool as acks arrive.
func Start(ctx context.Context, cfg Config, s *delivery.Sender, sp *spool.Spool, m *metrics.Metrics,
	backlog []spool.Spooled) *Driver {
	d := &Driver{cfg: cfg, log: cfg.Logger, spool: sp, metrics: m, ctx: ctx,
		connCh: make(chan connEvent, 256), done: make(chan struct{})}
	l := &loop{d: d, s: s, meta: map[uint64]msgMeta{}}
	l.clock = time.NewTimer(time.Hour)
	l.clock.Stop()
	l.watermark, l.persisted = s.Watermark(), s.Watermark()
	d.loop = l
	// The backlog is stepped before Start returns: Spooled may be called
	// at once, and the Sender takes ids in order.
	for _, in := range backlog {
		l.spooled(in)
	}
	l.dial()
	go d.run()
	return d
}

// Done is closed once the driver has stopped (after ctx ended), the
// watermark persisted.
func (d *Driver) Done() <-chan struct{} { return d.done }

func (d *Driver) now() int64 { return d.cfg.Now() }
