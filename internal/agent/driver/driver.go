// Package driver delivers the agent's spool to a sink: it owns the
// delivery.Sender and the session. One goroutine (the loop) feeds the
// Sender every event (a message spooled, a frame from the sink, a session
// won or lost, the clock) and carries out its actions; per session, one
// goroutine receives frames and one writes messages read straight from the
// spool. The driver keeps no protocol timing of its own: the Sender keeps
// the resend, reconnect and progress deadlines, and the loop keeps one
// timer at the Sender's NextDeadline. (Two clocks are not the Sender's:
// the handshake deadline, which bounds a dial before there is a session,
// and the 100ms rate limit on persisting the acknowledged watermark.)
//
// The driver sees sinks only through protocol.Dialer: gRPC in production,
// memconn in tests and the simulation.
package driver

import (
	"context"
	"log/slog"
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
}

// Start delivers backlog (spooled before the start, not acknowledged)
// and then what arrives on spooled, until ctx ends. s is the Sender,
// already holding the spool's watermark. The driver acknowledges the
// spool as acks arrive.
func Start(ctx context.Context, cfg Config, s *delivery.Sender, sp *spool.Spool, m *metrics.Metrics,
	spooled <-chan []spool.Spooled, backlog []spool.Spooled) *Driver {
	d := &Driver{cfg: cfg, log: cfg.Logger, spool: sp, metrics: m, ctx: ctx,
		connCh: make(chan connEvent, 256), done: make(chan struct{})}
	go d.run(s, spooled, backlog)
	return d
}

// Done is closed once the driver has stopped (after ctx ended), the
// watermark persisted.
func (d *Driver) Done() <-chan struct{} { return d.done }

func (d *Driver) now() int64 { return d.cfg.Now() }
