package rr

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// fakeClock moves only when told: SleepUntil jumps to the target and calls
// advance it by their service time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) SleepUntil(t time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, t)
	c.now = max(c.now, t)
}
func (c *fakeClock) advance(d time.Duration) { c.mu.Lock(); c.now += d; c.mu.Unlock() }

func TestScheduleAnchoredNoDrift(t *testing.T) {
	// 3/s does not divide a second in nanoseconds: anchoring every send at
	// start + i/rate keeps request 3 at exactly one second.
	if got := Schedule(5*time.Second, 3, 3); got != 6*time.Second {
		t.Fatalf("Schedule(5s, 3/s, 3) = %v, want 6s", got)
	}
	if got := Schedule(0, 3, 3000); got != 1000*time.Second {
		t.Fatalf("Schedule(0, 3/s, 3000) = %v, want 1000s", got)
	}
}

func TestOpenRateAccuracyFakeClock(t *testing.T) {
	for _, rate := range []float64{100, 1000, 333} {
		clk := &fakeClock{}
		res := OpenSync(context.Background(), clk, rate, 3*time.Second, func(context.Context) error {
			clk.advance(50 * time.Microsecond)
			return nil
		})
		want := int64(rate * 3)
		if res.Sent != want || res.Latency.Count != want {
			t.Fatalf("rate %v: sent %d, recorded %d, want %d", rate, res.Sent, res.Latency.Count, want)
		}
		for i, at := range clk.sleeps {
			if at != Schedule(0, rate, int64(i)) {
				t.Fatalf("rate %v: send %d intended at %v, want %v", rate, i, at, Schedule(0, rate, int64(i)))
			}
		}
		if res.Latency.P99 < 49 || res.Latency.P99 > 51 {
			t.Fatalf("rate %v: p99 %v µs, want 50", rate, res.Latency.P99)
		}
	}
}

func TestOpenConcurrentSendsAll(t *testing.T) {
	clk := &fakeClock{}
	res := Open(context.Background(), clk, 500, 2*time.Second, 64, func(context.Context) error { return nil })
	if res.Sent != 1000 || res.Latency.Count != 1000 || res.Errors != 0 {
		t.Fatalf("sent %d recorded %d errors %d, want 1000 1000 0", res.Sent, res.Latency.Count, res.Errors)
	}
}

func TestCoordinatedOmissionCorrection(t *testing.T) {
	// 100/s for 10 s; every reply takes 100 µs except the 100th, which
	// stalls one second. A loop that timed each call from its actual send
	// would see one slow call in a thousand (p99 100 µs); from the intended
	// send time the ~100 requests held back by the stall are slow too.
	clk := &fakeClock{}
	n := 0
	naive := NewRecorder()
	res := OpenSync(context.Background(), clk, 100, 10*time.Second, func(context.Context) error {
		n++
		t0 := clk.Now()
		if n == 100 {
			clk.advance(time.Second)
		} else {
			clk.advance(100 * time.Microsecond)
		}
		naive.Record(clk.Now() - t0)
		return nil
	})
	if res.Latency.Count != 1000 {
		t.Fatalf("recorded %d, want 1000", res.Latency.Count)
	}
	ns := naive.Summary()
	if ns.P99 > 110 {
		t.Fatalf("naive p99 %v µs: the test's premise is wrong", ns.P99)
	}
	if res.Latency.P99 < 800_000 || res.Latency.Max < 990_000 || res.Latency.P90 < 5_000 {
		t.Fatalf("corrected p90 %v p99 %v max %v µs: the stall was not charged to the held-back requests",
			res.Latency.P90, res.Latency.P99, res.Latency.Max)
	}

	// HdrHistogram's own correction for a closed caller: one 1 s reply at
	// an expected 10 ms interval stands for 100 requests, 10 ms … 1 s.
	r := NewRecorder()
	r.RecordCorrected(time.Second, 10*time.Millisecond)
	s := r.Summary()
	if s.Count != 100 || s.P50 < 490_000 || s.P50 > 510_000 {
		t.Fatalf("corrected: count %d p50 %v, want 100 and ~500000", s.Count, s.P50)
	}
}

func TestPercentiles(t *testing.T) {
	r := NewRecorder()
	for i := 1; i <= 10000; i++ {
		r.Record(time.Duration(i) * time.Microsecond)
	}
	s := r.Summary()
	near := func(name string, got, want float64) {
		if got < want*0.999 || got > want*1.001 {
			t.Errorf("%s = %v, want %v ±0.1%%", name, got, want)
		}
	}
	near("p50", s.P50, 5000)
	near("p90", s.P90, 9000)
	near("p99", s.P99, 9900)
	near("p99.9", s.P999, 9990)
	near("max", s.Max, 10000)
	if s.Count != 10000 {
		t.Errorf("count %d", s.Count)
	}
	// Out-of-range values are clamped, not lost.
	r.Record(0)
	r.Record(time.Hour)
	if s := r.Summary(); s.Count != 10002 || s.Max < histMax*0.999 {
		t.Errorf("after clamping: count %d max %v", s.Count, s.Max)
	}
}

func TestClosedKeepsNInFlight(t *testing.T) {
	clk := &fakeClock{}
	res := Closed(context.Background(), clk, 1, time.Second, func(context.Context) error {
		clk.advance(time.Millisecond)
		return nil
	})
	if res.Sent != 1000 || res.Latency.Count != 1000 {
		t.Fatalf("sent %d recorded %d, want 1000", res.Sent, res.Latency.Count)
	}
	// With 8 workers, at most 8 calls are ever outstanding.
	var mu sync.Mutex
	cur, peak := 0, 0
	clk2 := &fakeClock{}
	Closed(context.Background(), clk2, 8, 10*time.Millisecond, func(context.Context) error {
		mu.Lock()
		cur++
		peak = max(peak, cur)
		mu.Unlock()
		clk2.advance(time.Microsecond)
		mu.Lock()
		cur--
		mu.Unlock()
		return nil
	})
	if peak > 8 || peak < 1 {
		t.Fatalf("peak in flight %d, want 1..8", peak)
	}
}

func TestBurstShape(t *testing.T) {
	// The shape of the Olympics harness: every call starts at a whole second below the
	// spread, so about calls/seconds start together.
	clk := &fakeClock{}
	var mu sync.Mutex
	var delays []time.Duration
	sleep := func(d time.Duration) { mu.Lock(); delays = append(delays, d); mu.Unlock() }
	res := Burst(context.Background(), clk, sleep, rand.New(rand.NewPCG(1, 2)), 600, 6, func(context.Context) error { return nil })
	if res.Sent != 600 || res.Latency.Count != 600 || len(delays) != 600 {
		t.Fatalf("sent %d recorded %d slept %d, want 600", res.Sent, res.Latency.Count, len(delays))
	}
	per := map[time.Duration]int{}
	for _, d := range delays {
		if d%time.Second != 0 || d < 0 || d >= 6*time.Second {
			t.Fatalf("delay %v is not a whole second below 6 s", d)
		}
		per[d]++
	}
	if len(per) != 6 {
		t.Fatalf("seconds used: %v", per)
	}
}
