// Package memrelease gives a daemon's freed memory back to the operating
// system once a burst of load has gone.
//
// The Go runtime keeps the pages it freed until its background scavenger
// returns them, a little at a time over minutes, and a daemon left idle
// allocates too little to run a GC at all (only the forced one every two
// minutes), so the garbage of the burst is not even freed: after 100
// hostile clients went, the sink's RSS stayed at 130 MB of a 234 MB peak,
// and an operator (or an orchestrator's memory limit) sees a daemon that
// looks like it leaks (docs/reliability.md, "Hostile clients on every
// listener").
//
// Watch samples the runtime every few seconds with runtime/metrics (cheap:
// no stop-the-world, unlike runtime.ReadMemStats) and calls
// debug.FreeOSMemory (a GC, then every free page back to the OS) when the
// memory the runtime holds has grown well above where it last settled and
// the allocation rate has stayed low for a while: the load went away. It
// does not wait for the heap in use to drop, because without a GC it does
// not: the allocation rate is what tells that the load ended. Releases are
// at least MinInterval apart, and a busy daemon (allocating faster than
// QuietRate) never releases, so it costs nothing under steady load.
//
// The decision (Decider) is separate from the clock and the runtime, so
// that tests feed it samples and times.
package memrelease

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy says when the memory is worth releasing.
type Policy struct {
	// MinExcess: the memory held must exceed the floor (the least held
	// since the last release, or since the start) by at least this much.
	MinExcess uint64
	// QuietRate (bytes allocated per second) and Quiet: the allocation
	// rate must have stayed at or below QuietRate for Quiet.
	QuietRate float64
	Quiet     time.Duration
	// MinInterval is the least time between two releases.
	MinInterval time.Duration
}

// DefaultPolicy: 4 MiB over the floor (a tenth of an idle daemon's
// RSS: "back within 10 %" is the goal), allocating at most 1 MiB/s (an
// idle daemon scraped for metrics allocates a few KiB/s; a loaded one,
// MB/s) for 6 s, at most one release per 30 s.
var DefaultPolicy = Policy{MinExcess: 4 << 20, QuietRate: 1 << 20, Quiet: 6 * time.Second, MinInterval: 30 * time.Second}

// Sample is one look at the runtime.
type Sample struct {
	At time.Time
	// Allocated is the cumulative count of bytes allocated on the heap
	// (/gc/heap/allocs:bytes).
	Allocated uint64
	// Held is the memory the runtime holds from the OS: everything it
	// mapped less what it returned (/memory/classes/total:bytes minus
	// /memory/classes/heap/released:bytes), roughly its part of RSS.
	Held uint64
}

// Decider decides from samples when to release. The zero value is not
// ready: use NewDecider.
type Decider struct {
	p           Policy
	started     bool
	prev        Sample
	quietSince  time.Time // start of the current quiet stretch; zero while busy
	floor       uint64
	lastRelease time.Time
}

// NewDecider returns a Decider with policy p.
func NewDecider(p Policy) *Decider { return &Decider{p: p} }

// Observe takes the next sample (times increasing) and reports whether
// to release now.
func (d *Decider) Observe(s Sample) bool {
	if !d.started {
		d.started, d.prev, d.floor, d.quietSince = true, s, s.Held, s.At
		return false
	}
	dt := s.At.Sub(d.prev.At)
	if dt <= 0 {
		return false
	}
	rate := float64(s.Allocated-d.prev.Allocated) / dt.Seconds()
	switch {
	case rate > d.p.QuietRate:
		d.quietSince = time.Time{}
	case d.quietSince.IsZero():
		d.quietSince = d.prev.At // the interval since the last sample was quiet
	}
	d.floor = min(d.floor, s.Held)
	d.prev = s
	return !d.quietSince.IsZero() && s.At.Sub(d.quietSince) >= d.p.Quiet &&
		s.Held >= d.floor+d.p.MinExcess &&
		(d.lastRelease.IsZero() || s.At.Sub(d.lastRelease) >= d.p.MinInterval)
}

// Released records a release done at after.At, after which the runtime
// held after.Held: the new floor.
func (d *Decider) Released(after Sample) {
	d.lastRelease, d.floor = after.At, after.Held
}

// Interval is how often Start samples the runtime.
const Interval = 2 * time.Second

// Start watches this process's memory every Interval until ctx ends,
// releasing it as DefaultPolicy says (logged at Debug). Daemons call it
// once.
func Start(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(Interval)
	go func() {
		defer t.Stop()
		Watch(ctx, t.C, NewDecider(DefaultPolicy), func(before, after Sample) {
			log.Debug("returned freed memory to the OS", "held_before", before.Held, "held_after", after.Held)
		})
	}()
}

// Watch samples the runtime at each tick (taking the tick's time as the
// sample's) until ctx ends or ticks closes, and releases when d says;
// released, if not nil, is called after each release.
func Watch(ctx context.Context, ticks <-chan time.Time, d *Decider, released func(before, after Sample)) {
	for {
		select {
		case <-ctx.Done():
			return
		case now, ok := <-ticks:
			if !ok {
				return
			}
			s := Read(now)
			if !d.Observe(s) {
				continue
			}
			debug.FreeOSMemory()
			after := Read(now)
			d.Released(after)
			if released != nil {
				released(s, after)
			}
		}
	}
}

// The runtime/metrics names Read uses.
const (
	allocsMetric   = "/gc/heap/allocs:bytes"
	totalMetric    = "/memory/classes/total:bytes"
	releasedMetric = "/memory/classes/heap/released:bytes"
)

// Read samples this process's runtime, at time at.
func Read(at time.Time) Sample {
	m := []metrics.Sample{{Name: allocsMetric}, {Name: totalMetric}, {Name: releasedMetric}}
	metrics.Read(m)
	s := Sample{At: at, Allocated: value(m[0])}
	if total, released := value(m[1]), value(m[2]); total > released {
		s.Held = total - released
	}
	return s
}

func value(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}
