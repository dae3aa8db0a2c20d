package rsocket

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Deadlines against careless and hostile peers (docs/reliability.md).
// Between frames a connection may stay silent as long as its keepalive
// and max lifetime allow; two things may not take long:
//
//   - the first frame: a server's connection must deliver its SETUP (or,
//     on a resumable listener, its SETUP or RESUME) within the setup
//     timeout, 10 s by default (WithSetupTimeout). A client that connects
//     and sends nothing, or part of a frame, is closed then: it never
//     agreed to any keepalive.
//   - a started frame: once any byte of a frame (its length prefix
//     included) has arrived, the rest must keep coming. The frame stall
//     timeout, 30 s by default (WithFrameStallTimeout), bounds the
//     silence within a frame, not the frame's total time: each read that
//     brings bytes restarts it, so a slow link carrying a 16 MiB frame
//     is not cut off, and a peer that sends half a frame and stops is.
//     On TCP and TLS it is a read deadline set while a frame is partial
//     (and cleared between frames); on WebSocket it runs from a message's
//     first frame header to its end, restarted by each read that brings
//     bytes.
const (
	defaultSetupTimeout      = firstFrameTimeout
	defaultFrameStallTimeout = 30 * time.Second
)

// WithSetupTimeout sets how long a server waits for a connection's first
// frame (SETUP, or RESUME on a resumable listener) before closing it;
// default 10 s. Zero or less: the default.
func WithSetupTimeout(d time.Duration) Option {
	return func(o *options) { o.setupTimeout = d }
}

// WithFrameStallTimeout sets how long the bytes of a started frame may
// stop arriving before the connection is closed (a frame's length prefix
// came and its rest does not); default 30 s, on servers and clients
// alike. It bounds silence, not the frame's total time. Zero or less:
// the default.
func WithFrameStallTimeout(d time.Duration) Option {
	return func(o *options) { o.frameStall = d }
}

func (o *options) setupTimeoutOrDefault() time.Duration {
	if o.setupTimeout > 0 {
		return o.setupTimeout
	}
	return defaultSetupTimeout
}

func (o *options) frameStallOrDefault() time.Duration {
	if o.frameStall > 0 {
		return o.frameStall
	}
	return defaultFrameStallTimeout
}

// errNoSetup ends a server connection whose first frame did not come in
// time.
var errNoSetup = errors.New("rsocket: no SETUP within the setup timeout")

// watchSetup closes server connection c unless its SETUP was handled
// within d. The timer is stopped when the connection ends first.
func (c *Conn) watchSetup(d time.Duration) {
	t := time.AfterFunc(d, func() {
		c.post(func() {
			select {
			case <-c.setup:
				return
			default:
			}
			c.opts.log.Debug("rsocket: closing a connection that sent no SETUP", "timeout", d)
			_ = c.machine.Close(frame.ErrorCodeConnectionError, "no SETUP within "+d.String())
		})
	})
	context.AfterFunc(c.ctx, func() { t.Stop() })
}

// stallDeadline is a frameReader's frame stall timeout: a read deadline
// on its connection, set while a frame is partial and cleared between
// frames. The zero value (no deadline setter) does nothing.
type stallDeadline struct {
	set   func(time.Time) error // the connection's SetReadDeadline; nil: none
	d     time.Duration
	armed bool // a deadline is set
}

// arm is called before each read: partial says the read continues a
// frame. Setting a deadline is no syscall (the runtime's poller keeps
// it), so doing it per read costs little next to the read.
func (s *stallDeadline) arm(partial bool) {
	switch {
	case s.set == nil:
	case partial:
		_ = s.set(time.Now().Add(s.d))
		s.armed = true
	case s.armed:
		_ = s.set(time.Time{})
		s.armed = false
	}
}
