package netem

import (
	"sync/atomic"
	"time"
)

const (
	// fineSpan: waits up to this long go to the fine timer, when there is one.
	fineSpan = 3 * time.Millisecond
	// coarseMargin: a longer wait first sleeps on a time.Timer until this
	// long before the deadline (a time.Timer may fire up to ~1 ms late).
	coarseMargin = 2 * time.Millisecond

	// The fine timer wakes a little late (timer slack, waking the poller
	// and the goroutine): typically 30–150 µs. wakeLag tracks the median of
	// that overshoot and fine sleeps aim that much early, so wake-ups are
	// centred on their deadline instead of all late.
	initialWakeLag = 50 * time.Microsecond
	maxWakeLag     = 300 * time.Microsecond
	wakeLagStep    = 2 * time.Microsecond
)

// wakeLag is a running estimate of the median fine-timer overshoot: a step
// up when a sleep overshot more, a step down when less.
type wakeLag struct{ ns atomic.Int64 }

func (w *wakeLag) get() time.Duration {
	v := time.Duration(w.ns.Load())
	if v == 0 {
		return initialWakeLag
	}
	return v
}

func (w *wakeLag) observe(over time.Duration) {
	est := w.get()
	if over > est {
		est += wakeLagStep
	} else {
		est -= wakeLagStep
	}
	w.ns.Store(int64(min(max(est, wakeLagStep), maxWakeLag)))
}

// sleeper waits precisely for a point on the link's clock. It belongs to one
// goroutine.
type sleeper struct {
	t    *time.Timer
	fine fineTimer
}

// sleepUntil returns true once l.now() is about t, or false if done is
// closed first. It may return up to half the estimated wake lag early
// rather than sleep again and overshoot by more. Only the last fineSpan of
// a wait is uninterruptible.
func (s *sleeper) sleepUntil(l *Link, t time.Duration, done <-chan struct{}) bool {
	for {
		now := l.now()
		d := t - now
		if d <= 0 {
			return true
		}
		if d <= fineSpan {
			lag := l.lag.get()
			if d <= lag/2 {
				return true
			}
			want := max(d-lag, time.Microsecond)
			if s.fine.sleep(want) {
				l.lag.observe(l.now() - now - want)
				continue
			}
		}
		if d > fineSpan {
			d -= coarseMargin
		}
		if s.t == nil {
			s.t = time.NewTimer(d)
		} else {
			s.t.Reset(d)
		}
		select {
		case <-s.t.C:
		case <-done:
			s.t.Stop()
			return false
		}
	}
}

func (s *sleeper) close() {
	if s.t != nil {
		s.t.Stop()
	}
	s.fine.close()
}
