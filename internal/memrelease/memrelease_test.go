package memrelease

import (
	"context"
	"slices"
	"testing"
	"time"
)

const mib = 1 << 20

// feed gives d one sample per step (2 s apart) of allocating rate bytes/s
// while holding held[i] bytes, and returns the steps at which d said to
// release (calling Released with a floor of afterHeld).
func feed(d *Decider, start time.Time, rate uint64, held []uint64, afterHeld uint64) (releases []int) {
	var allocated uint64
	for i, h := range held {
		at := start.Add(time.Duration(i) * 2 * time.Second)
		if i > 0 {
			allocated += rate * 2
		}
		if d.Observe(Sample{At: at, Allocated: allocated, Held: h}) {
			releases = append(releases, i)
			d.Released(Sample{At: at, Allocated: allocated, Held: afterHeld})
		}
	}
	return releases
}

func repeat(v uint64, n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestDecider: the decision alone, fed samples and times.
func TestDecider(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	t.Run("steady load never releases", func(t *testing.T) {
		// 50 MiB/s for 10 minutes, holding 200 MiB over a 20 MiB start.
		held := append([]uint64{20 * mib}, repeat(200*mib, 300)...)
		if r := feed(NewDecider(DefaultPolicy), t0, 50*mib, held, 20*mib); len(r) != 0 {
			t.Errorf("released under load at steps %v", r)
		}
	})
	t.Run("burst then quiet releases once", func(t *testing.T) {
		d := NewDecider(DefaultPolicy)
		var allocated uint64
		step := 0
		observe := func(rate, held uint64) bool {
			at := t0.Add(time.Duration(step) * 2 * time.Second)
			if step > 0 {
				allocated += rate * 2
			}
			step++
			return d.Observe(Sample{At: at, Allocated: allocated, Held: held})
		}
		observe(0, 20*mib)
		for range 10 { // the burst: 100 MiB/s, 230 MiB held
			if observe(100*mib, 230*mib) {
				t.Fatal("released during the burst")
			}
		}
		// Quiet (a few KiB/s): not before 6 s of it, then at once.
		var at int
		for i := range 10 {
			if observe(4<<10, 230*mib) {
				at = i + 1
				d.Released(Sample{At: t0.Add(time.Duration(step-1) * 2 * time.Second), Held: 22 * mib})
				break
			}
		}
		if at*2 < int(DefaultPolicy.Quiet/time.Second) || at == 0 {
			t.Fatalf("released after %d quiet samples (2 s apart), want once %v of quiet passed", at, DefaultPolicy.Quiet)
		}
		// Released: held stays where the release left it, near the
		// start, no second one.
		for range 200 {
			if observe(4<<10, 22*mib) {
				t.Fatal("released again with nothing new to release")
			}
		}
	})
	t.Run("small growth is left alone", func(t *testing.T) {
		held := append([]uint64{20 * mib}, repeat(20*mib+DefaultPolicy.MinExcess-1, 100)...)
		if r := feed(NewDecider(DefaultPolicy), t0, 0, held, 20*mib); len(r) != 0 {
			t.Errorf("released %v for less than MinExcess", r)
		}
	})
	t.Run("at most once per MinInterval", func(t *testing.T) {
		// Quiet, and every sample back above the floor by far (the
		// release never returns anything): releases MinInterval apart.
		held := append([]uint64{20 * mib}, repeat(100*mib, 100)...)
		r := feed(NewDecider(DefaultPolicy), t0, 0, held, 20*mib)
		if len(r) < 2 {
			t.Fatalf("releases at steps %v, want several over %d s", r, 2*len(held))
		}
		for i := 1; i < len(r); i++ {
			if gap := time.Duration(r[i]-r[i-1]) * 2 * time.Second; gap < DefaultPolicy.MinInterval {
				t.Errorf("releases %v apart, want at least %v", gap, DefaultPolicy.MinInterval)
			}
		}
	})
	t.Run("a pause in a steady load shorter than Quiet", func(t *testing.T) {
		d := NewDecider(DefaultPolicy)
		var allocated uint64
		for i := range 200 {
			rate := uint64(50 * mib)
			if i%3 == 0 { // 2 s of quiet every 6 s
				rate = 0
			}
			if i > 0 {
				allocated += rate * 2
			}
			held := uint64(200 * mib)
			if i == 0 {
				held = 20 * mib
			}
			if d.Observe(Sample{At: t0.Add(time.Duration(i) * 2 * time.Second), Allocated: allocated, Held: held}) {
				t.Fatalf("released at step %d, in a pause of %v", i, 2*time.Second)
			}
		}
	})
	t.Run("connections gone", func(t *testing.T) {
		// Clients that hold memory and stay still: one release while
		// they hold (it returns little), then none while nothing
		// changes, until they go: the goroutines drop, held does not
		// (no GC ran), and that is due at once (MinInterval after the
		// last). Without the drop, the next is the Retry.
		for _, leave := range []bool{true, false} {
			d := NewDecider(DefaultPolicy)
			at := t0
			var releases []time.Duration
			g, held := 10, uint64(100*mib)
			d.Observe(Sample{At: at, Held: 20 * mib, Goroutines: g})
			for i := 1; i <= 100; i++ {
				at = at.Add(2 * time.Second)
				if i == 5 {
					g = 310 // they came
				}
				if i == 30 && leave {
					g = 12 // they went
				}
				if d.Observe(Sample{At: at, Held: held, Goroutines: g}) {
					releases = append(releases, at.Sub(t0))
					if g < 100 {
						held = 22 * mib // what they held went back
					} else {
						held -= 2 * mib
					}
					d.Released(Sample{At: at, Held: held, Goroutines: g})
				}
			}
			want := []time.Duration{DefaultPolicy.MinInterval, 60 * time.Second}
			if !leave {
				want = []time.Duration{DefaultPolicy.MinInterval, DefaultPolicy.MinInterval + DefaultPolicy.Retry}
			}
			if !slices.Equal(releases, want) {
				t.Errorf("clients leave %v: releases at %v, want %v", leave, releases, want)
			}
		}
	})
	t.Run("time going backwards", func(t *testing.T) {
		d := NewDecider(DefaultPolicy)
		d.Observe(Sample{At: t0, Held: 20 * mib})
		if d.Observe(Sample{At: t0.Add(-time.Second), Held: 500 * mib}) {
			t.Error("released on a sample older than the last")
		}
	})
}

// sink keeps the burst reachable until the test drops it.
var sink [][]byte

// TestWatchReleasesAfterBurst: the watcher with the real runtime, its
// ticks (and their times) given by the test, gives back the memory of a
// burst once the allocations stop, and not during the burst.
func TestWatchReleasesAfterBurst(t *testing.T) {
	ticks := make(chan time.Time)
	type release struct{ before, after Sample }
	released := make(chan release, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, ticks, NewDecider(DefaultPolicy), func(before, after Sample) { released <- release{before, after} })
	}()
	at := time.Unix(1_000_000, 0)
	tick := func() {
		at = at.Add(Interval)
		select {
		case ticks <- at:
		case <-time.After(time.Minute):
			t.Fatal("the watcher took no tick")
		}
	}
	tick()
	const burst = 128 << 20
	for range burst / mib {
		b := make([]byte, mib)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touched: resident
		}
		sink = append(sink, b)
	}
	tick() // the burst is seen: busy
	tick()
	select {
	case r := <-released:
		t.Fatalf("released during the burst: %+v", r)
	default:
	}
	sink = nil
	var r release
	for i := 0; ; i++ {
		tick()
		select {
		case r = <-released:
		default:
			if i > 20 {
				t.Fatalf("no release after %d quiet ticks", i)
			}
			continue
		}
		break
	}
	t.Logf("held %d MiB before the release, %d MiB after", r.before.Held/mib, r.after.Held/mib)
	if r.before.Held < r.after.Held+burst/2 {
		t.Errorf("held %d MiB before the release, %d MiB after: want at least %d MiB returned", r.before.Held/mib, r.after.Held/mib, burst/2/mib)
	}
	cancel()
	<-done
}
