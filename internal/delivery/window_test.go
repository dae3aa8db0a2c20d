package delivery

import (
	"math/rand/v2"
	"testing"
	"time"
)

// maxFilter against a naive reference. The three-sample filter trades
// exactness for O(1) memory: it may forget a sample that was never the best
// when it arrived, so it can report less than the true maximum of the
// window. What it guarantees, and what is checked: the result is a sample
// from the window, no more than the window's maximum, and no less than the
// latest sample.
func TestMaxFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const width = 100
	for trial := range 200 {
		var f maxFilter
		type smp struct {
			t int64
			v float64
		}
		var all []smp
		now := int64(0)
		for range 500 {
			now += int64(rng.IntN(20))
			v := rng.Float64() * 100
			if trial%2 == 0 { // trending series exercise expiry
				v += float64(now%400) / 4
			}
			f.update(width, now, v)
			all = append(all, smp{now, v})
			trueMax := 0.0
			found := false
			for _, s := range all {
				if now-s.t <= width {
					trueMax = max(trueMax, s.v)
					found = found || s.v == f.best()
				}
			}
			if got := f.best(); got > trueMax || got < v || !found {
				t.Fatalf("trial %d at %d: filter %v, window max %v, latest %v, in window %t",
					trial, now, got, trueMax, v, found)
			}
		}
	}
}

// ProbeRTT: once minRTT is 10s old the window drops to the floor for 200ms
// plus one SRTT, and a lower sample taken meanwhile becomes the new minimum.
func TestWindowProbeRTT(t *testing.T) {
	w := newWindow(0, 0)
	sec := int64(time.Second)
	rtt := 10 * time.Millisecond
	// 10 MB/s over 10ms: BDP 100 KB; the window is twice that.
	for now := int64(0); now <= 10*sec; now += int64(rtt) {
		w.tick(now)
		w.onSample(now, rtt, rtt, int64(rtt), 100_000, 10, false)
	}
	if w.probing || w.bytes != 200_000 || w.msgs != 20 {
		t.Fatalf("before probing: probing %t, window %d msgs %d bytes", w.probing, w.msgs, w.bytes)
	}
	// A standing queue has inflated RTT to 20ms; the 10ms minimum expires.
	now := 10*sec + 20*int64(time.Millisecond)
	w.onSample(now, 2*rtt, 2*rtt, int64(2*rtt), 200_000, 20, false)
	if !w.probing || w.bytes != autoMinBytes || w.msgs != autoMinMsgs {
		t.Fatalf("not probing: probing %t window %d/%d", w.probing, w.msgs, w.bytes)
	}
	if w.minRTT != int64(2*rtt) {
		t.Fatalf("expired minRTT not replaced: %v", time.Duration(w.minRTT))
	}
	// The queue drained: a lower sample arrives during the probe.
	w.onSample(now+int64(50*time.Millisecond), rtt, rtt, int64(rtt), 10_000, 1, false)
	if w.minRTT != int64(rtt) || !w.probing {
		t.Fatalf("probe sample: minRTT %v probing %t", time.Duration(w.minRTT), w.probing)
	}
	w.tick(now + int64(200*time.Millisecond+2*rtt))
	if w.probing || w.bytes != 200_000 {
		t.Fatalf("after the probe: probing %t window %d bytes", w.probing, w.bytes)
	}
	if w.minRTTAt != now+int64(200*time.Millisecond+2*rtt) {
		t.Fatalf("minRTT lifetime not restarted at the probe's end")
	}
}

// A step down in the rate is followed within one window.
func TestMaxFilterStepDown(t *testing.T) {
	var f maxFilter
	for now := int64(0); now < 100; now++ {
		f.update(50, now, 10)
	}
	for now := int64(100); now < 160; now++ {
		f.update(50, now, 1)
	}
	if f.best() != 1 {
		t.Fatalf("best %v a window after the step down, want 1", f.best())
	}
}

// A fixed window is what the config says, whatever the samples.
func TestWindowFixed(t *testing.T) {
	w := newWindow(3, 0)
	w.onSample(10, time.Millisecond, time.Millisecond, 10, 1<<30, 1<<20, false)
	if w.auto || w.msgs != 3 || w.bytes != 0 {
		t.Fatalf("fixed window changed: %+v", w)
	}
}

// An app-limited sample may raise the rate estimate but never lower it: a
// lull in the application must not shrink the window (BBR's rule).
func TestWindowAppLimitedSamples(t *testing.T) {
	w := newWindow(0, 0)
	rtt := 2 * time.Millisecond
	w.onSample(0, rtt, rtt, int64(rtt), 1_000_000, 4, false) // 500 MB/s
	full := w.bytes
	for now := int64(rtt); now < int64(3*time.Second); now += int64(rtt) {
		w.onSample(now, rtt, rtt, int64(rtt), 10_000, 1, true) // the app dried up
	}
	if w.bytes != full {
		t.Fatalf("app-limited samples shrank the window from %d to %d", full, w.bytes)
	}
	w.onSample(int64(3*time.Second), rtt, rtt, int64(rtt), 4_000_000, 8, true)
	if w.bytes <= full {
		t.Fatalf("a higher app-limited sample did not raise the window: %d", w.bytes)
	}
	// Samples that are not app-limited do bring the estimate down, once the
	// old maximum ages out of the (at least one second) filter.
	for now := int64(4 * time.Second); now < int64(6*time.Second); now += int64(rtt) {
		w.onSample(now, rtt, rtt, int64(rtt), 10_000, 1, false)
	}
	if w.bytes >= full {
		t.Fatalf("path-limited samples did not shrink the window: %d", w.bytes)
	}
}

// The byte floor keeps four typical messages in flight.
func TestWindowFloorFollowsMessageSize(t *testing.T) {
	w := newWindow(0, 0)
	for i := 0; i < 50; i++ {
		w.observeSize(256 << 10)
	}
	// After a first sample of a slow path, the window is the floor.
	w.onSample(int64(time.Millisecond), time.Millisecond, time.Millisecond, int64(time.Millisecond), 1, 1, false)
	if w.bytes != 4*(256<<10) {
		t.Fatalf("floor %d bytes, want four 256 KiB messages", w.bytes)
	}
}

// Start-up grows the window by 2/ln 2 per round until the rate stops
// growing, then settles at a gain of 2.
func TestWindowStartup(t *testing.T) {
	w := newWindow(0, 0)
	if w.bytes != autoInitBytes || w.msgs != autoInitMsgs {
		t.Fatalf("initial window %d/%d", w.msgs, w.bytes)
	}
	rtt := 100 * time.Millisecond
	// The path delivers at most 10 MB/s; the window limits below that.
	const pathRate = 10e6 / 1e9 // bytes per ns
	now := int64(0)
	var grew []int64
	for round := 0; round < 12; round++ {
		now += int64(rtt)
		rate := min(float64(w.bytes)/float64(rtt), pathRate)
		w.onSample(now, rtt, rtt, int64(rtt), int64(rate*float64(rtt)), 10, false)
		grew = append(grew, w.bytes)
	}
	if !w.filled {
		t.Fatalf("start-up never ended: windows %v", grew)
	}
	if want := int64(2 * pathRate * float64(rtt)); w.bytes != want {
		t.Fatalf("steady window %d, want 2×BDP = %d (windows %v)", w.bytes, want, grew)
	}
}
