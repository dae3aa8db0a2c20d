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
// debug.FreeOSMemory (a GC, then every free page back to the OS) once the
// allocation rate has stayed low for a while (the load went away, or holds
// still) and there is something to return: the memory held grew since the
// last release, or goroutines went (connections closed: what they held is
// garbage), or, every two minutes, the memory held is above the least it
// has been. It does not wait for the heap in use to drop, because without
// a GC it does not. Releases are at least MinInterval apart, and a busy
// daemon (allocating faster than QuietRate) never releases, so it costs
// nothing under steady load.
//
// The decision (Decider) is separate from the clock and the runtime, so
// that tests feed it samples and times.
package memrelease

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Policy says when the memory is worth releasing.
type Policy struct {
	// QuietRate (bytes allocated per second) and Quiet: a release needs
	// the allocation rate to have stayed at or below QuietRate for
	// Quiet (the load went away, or holds still).
	QuietRate float64
	Quiet     time.Duration
	// MinInterval is the least time between two releases.
	MinInterval time.Duration
	// MinExcess: a release is due when the memory held has grown by this
	// much since the last release left it (new garbage, or growth).
	MinExcess uint64
	// GoroutineDrop: a release is due when the goroutines have dropped by
	// at least this many, and by a quarter, from their peak since the
	// last release: connections went, and what they held is garbage that
	// no GC will free while the daemon is idle.
	GoroutineDrop int
	// Retry: a release is also due this long after the last one while
	// the memory held is MinExcess above the least it has been (for
	// memory freed without either sign; the runtime forces a GC every
	// two minutes anyway, so this costs about as much).
	Retry time.Duration
}

// DefaultPolicy: allocating at most 1 MiB/s (an idle daemon scraped for
// metrics allocates a few KiB/s; a loaded one, MB/s) for 6 s, at most one
// release per 20 s; due at 4 MiB of growth (a tenth of an idle daemon's
// RSS: "back within 10 %" is the goal), at 32 goroutines gone, or every
// 2 minutes while above the least.
var DefaultPolicy = Policy{QuietRate: 1 << 20, Quiet: 6 * time.Second, MinInterval: 20 * time.Second,
	MinExcess: 4 << 20, GoroutineDrop: 32, Retry: 2 * time.Minute}

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
	// Goroutines is the count of live goroutines
	// (/sched/goroutines:goroutines).
	Goroutines int
}

// Decider decides from samples when to release. Use NewDecider.
type Decider struct {
	p          Policy
	started    bool
	prev       Sample
	quietSince time.Time // start of the current quiet stretch; zero while busy
	// lastRelease is when the last release was (the first sample's time
	// before any); lastAfter what it left held; least the least held
	// after any release (or at the first sample); peakG the most
	// goroutines since the last release.
	lastRelease time.Time
	lastAfter   uint64
	least       uint64
	peakG       int
}

// NewDecider returns a Decider with policy p.
func NewDecider(p Policy) *Decider { return &Decider{p: p} }

// Observe takes the next sample (times increasing) and reports whether
// to release now.
func (d *Decider) Observe(s Sample) bool {
	if !d.started {
		d.started, d.prev, d.quietSince = true, s, s.At
		d.lastRelease, d.lastAfter, d.least, d.peakG = s.At, s.Held, s.Held, s.Goroutines
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
	d.prev = s
	d.peakG = max(d.peakG, s.Goroutines)
	since := s.At.Sub(d.lastRelease)
	if d.quietSince.IsZero() || s.At.Sub(d.quietSince) < d.p.Quiet || since < d.p.MinInterval {
		return false
	}
	drop := d.peakG - s.Goroutines
	return s.Held >= d.lastAfter+d.p.MinExcess ||
		drop >= d.p.GoroutineDrop && drop >= d.peakG/4 ||
		since >= d.p.Retry && s.Held >= d.least+d.p.MinExcess
}

// Released records a release done at after.At, which left after.Held
// held and after.Goroutines running.
func (d *Decider) Released(after Sample) {
	d.lastRelease, d.lastAfter, d.peakG = after.At, after.Held, after.Goroutines
	d.least = min(d.least, after.Held)
}

// Interval is how often Start samples the runtime.
const Interval = 2 * time.Second

// Start watches this process's memory every Interval until ctx ends,
// releasing it as DefaultPolicy says (logged at Debug). Daemons call it
// once.
func Start(ctx context.Context, log *slog.Logger) {
	d := NewDecider(DefaultPolicy)
	// The first sample now, not at the first tick: a burst that comes
	// and goes before it (a client ready when the daemon starts) would
	// otherwise be the baseline, and nothing would be seen to go.
	d.Observe(Read(time.Now()))
	t := time.NewTicker(Interval)
	go func() {
		defer t.Stop()
		Watch(ctx, t.C, d, func(before, after Sample) {
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
			// Two collections: what sync.Pools held (gRPC's buffers, the
			// zstd decoders) survives the first one in the pools' victim
			// caches and is freed by the second (measured after 100
			// ingest clients resetting: held 30 MB after one, RSS 45 MB).
			runtime.GC()
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
	allocsMetric     = "/gc/heap/allocs:bytes"
	totalMetric      = "/memory/classes/total:bytes"
	releasedMetric   = "/memory/classes/heap/released:bytes"
	goroutinesMetric = "/sched/goroutines:goroutines"
)

// Read samples this process's runtime, at time at.
func Read(at time.Time) Sample {
	m := []metrics.Sample{{Name: allocsMetric}, {Name: totalMetric}, {Name: releasedMetric}, {Name: goroutinesMetric}}
	metrics.Read(m)
	s := Sample{At: at, Allocated: value(m[0]), Goroutines: int(value(m[3]))}
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
