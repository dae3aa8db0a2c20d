package collect

import (
	"cmp"
	"errors"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
)

// A collector's body that sends a byte now and then is never silent for
// the body idle timeout, so that timeout alone lets it hold its handler,
// and the buffer reserved for it (up to 4 MiB from a declared
// Content-Length), for as long as it trickles: a 64 MiB body at a byte
// per 29 s takes 60 years. The stall rule is the sink's and the OTLP/gRPC
// receiver's (grpcserve.StallWatch): a body that holds at least
// defaults.StallBytes (its buffer, received or reserved) and brings less
// than StallBytes more in the stall timeout is ended with 503 (retried by the sender). A slow
// link that moves 64 KiB a minute (about 1.1 KB/s) goes through; below
// 64 KiB held, a stall costs little and the idle timeout bounds silence.

// errStalled is a body that brought too little in the stall timeout.
var errStalled = errors.New("the request body sent less than " + defaults.FormatSize(defaults.StallBytes) +
	" in the stall timeout: a trickle holds the request's buffer")

// bodyLimits bound how a request body may arrive.
type bodyLimits struct {
	idle  time.Duration // the longest silence
	stall time.Duration // the stall timeout
	// clock returns the time once a Read has brought the body to fed
	// bytes (Config.stallClock; nil: the monotonic clock).
	clock func(fed int64) time.Time
}

// bodyLimits are the receiver's limits on request bodies.
func (rc *Receiver) bodyLimits() bodyLimits {
	return bodyLimits{idle: rc.cfg.BodyIdleTimeout, stall: cmp.Or(rc.cfg.StallTimeout, defaults.StallTimeout), clock: rc.cfg.stallClock}
}

// stallBody applies the stall rule to r: held reports the memory the
// request holds for its body.
type stallBody struct {
	r       io.ReadCloser
	timeout time.Duration
	clock   func(fed int64) time.Time
	held    func() int64

	fed, markFed int64
	markAt       time.Time
}

func newStallBody(r io.ReadCloser, lim bodyLimits, held func() int64) *stallBody {
	b := &stallBody{r: r, timeout: lim.stall, clock: lim.clock, held: held}
	if b.clock == nil {
		start := time.Now()
		// The monotonic clock: a wall clock step cuts no one.
		b.clock = func(int64) time.Time { return start.Add(time.Since(start)) }
	}
	b.markAt = b.clock(0)
	return b
}

// Read checks the rule each time bytes arrive: a trickle brings some at
// least every idle timeout, so it is ended within the stall timeout plus
// that.
func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.fed += int64(n)
	now := b.clock(b.fed)
	switch {
	case b.fed-b.markFed >= defaults.StallBytes:
		b.markFed, b.markAt = b.fed, now
	case err == nil && b.held() >= defaults.StallBytes && now.Sub(b.markAt) >= b.timeout:
		return n, errStalled
	}
	return n, err
}

// Close closes the body it reads.
func (b *stallBody) Close() error { return b.r.Close() }
