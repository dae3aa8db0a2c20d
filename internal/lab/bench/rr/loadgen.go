// Package rr is the load generator of `sluice bench rr`: request-response
// protocols behind one small interface, driven open loop (a constant
// intended rate, latency measured from the intended send time), closed loop
// (N requests in flight) or in bursts (the shape of the harness of
// "Request-Response Olympics").
//
// The pacing and recording logic takes a Clock so that its tests run on a
// fake clock: no test here depends on how fast the machine is.
package rr

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Clock is the time source of the generator; Now is monotonic time since
// some fixed start.
type Clock interface {
	Now() time.Duration
	// SleepUntil returns once Now() >= t (or right away if it already is).
	SleepUntil(t time.Duration)
}

// spin is how much of every wait RealClock burns on the CPU instead of
// sleeping: Go timers overshoot by up to about a millisecond on a busy VM,
// and an open-loop generator that trusted them would measure its own timer.
const spin = 1200 * time.Microsecond

// RealClock is the wall (monotonic) clock. It sleeps all but the last
// stretch of a wait and spins the rest.
type RealClock struct {
	start time.Time
	spun  atomic.Int64 // nanoseconds spent spinning
}

// NewRealClock starts a clock at zero now.
func NewRealClock() *RealClock { return &RealClock{start: time.Now()} }

func (c *RealClock) Now() time.Duration { return time.Since(c.start) }

func (c *RealClock) SleepUntil(t time.Duration) {
	if d := t - c.Now(); d > spin {
		time.Sleep(d - spin)
	}
	s0 := c.Now()
	s1 := s0
	for s1 < t {
		runtime.Gosched()
		s1 = c.Now()
	}
	c.spun.Add(int64(s1 - s0))
}

// Spun is the time SleepUntil spent spinning: CPU the generator burnt to
// be punctual, to be left out of the client's CPU per request.
func (c *RealClock) Spun() time.Duration { return time.Duration(c.spun.Load()) }

// Histogram range: 1 µs to 60 s at three significant digits.
const (
	histMin = 1
	histMax = 60_000_000
)

// Recorder collects latencies in microseconds.
type Recorder struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	n  int64
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{h: hdrhistogram.New(histMin, histMax, 3)} }

// Record adds one latency; values outside the range are clamped so that a
// stall is counted rather than dropped.
func (r *Recorder) Record(d time.Duration) {
	us := min(max(d.Microseconds(), histMin), histMax)
	r.mu.Lock()
	_ = r.h.RecordValue(us)
	r.n++
	r.mu.Unlock()
}

// RecordCorrected adds one latency measured by a caller that waits for each
// reply before sending the next, at expected intervals: the requests that
// such a caller failed to send during a long reply are added too (HdrHistogram's
// coordinated-omission correction).
func (r *Recorder) RecordCorrected(d, expected time.Duration) {
	us := min(max(d.Microseconds(), histMin), histMax)
	r.mu.Lock()
	before := r.h.TotalCount()
	_ = r.h.RecordCorrectedValue(us, max(expected.Microseconds(), 1))
	r.n += r.h.TotalCount() - before
	r.mu.Unlock()
}

// Summary is what one run measured, latencies in microseconds.
type Summary struct {
	Count                          int64
	P50, P90, P99, P999, Max, Mean float64
}

// Summary reads the percentiles.
func (r *Recorder) Summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := func(p float64) float64 { return float64(r.h.ValueAtQuantile(p)) }
	return Summary{Count: r.h.TotalCount(), P50: q(50), P90: q(90), P99: q(99), P999: q(99.9),
		Max: float64(r.h.Max()), Mean: r.h.Mean()}
}

// Call is one request-response; it returns once the reply arrived.
type Call func(ctx context.Context) error

// Result is one run of the generator.
type Result struct {
	Latency Summary
	Sent    int64 // requests issued
	Errors  int64
	Elapsed time.Duration // first intended send to last reply
}

// RPS is the achieved rate of completed requests.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Latency.Count) / r.Elapsed.Seconds()
}

// Schedule returns the intended send time of request i at rate per second
// from start: anchored at start, never at the previous send, so that a late
// send does not shift every later one.
func Schedule(start time.Duration, rate float64, i int64) time.Duration {
	return start + time.Duration(float64(i)*float64(time.Second)/rate)
}

// Open sends at rate requests per second for duration and records each
// latency from the request's intended send time. Requests run on their own
// goroutines (at most maxInflight at once; beyond that the pacer waits, and
// the wait is charged to the requests' latency because it is measured from
// their intended time).
func Open(ctx context.Context, clk Clock, rate float64, duration time.Duration, maxInflight int, call Call) Result {
	rec := NewRecorder()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   int64
		sem    = make(chan struct{}, max(maxInflight, 1))
		start  = clk.Now()
		sent   int64
		lastAt time.Duration
	)
	for i := int64(0); ; i++ {
		at := Schedule(start, rate, i)
		if at-start >= duration || ctx.Err() != nil {
			break
		}
		clk.SleepUntil(at)
		sem <- struct{}{}
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := call(ctx)
			done := clk.Now()
			<-sem
			mu.Lock()
			if err != nil {
				errs++
			} else {
				rec.Record(done - at)
			}
			lastAt = max(lastAt, done)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return Result{Latency: rec.Summary(), Sent: sent, Errors: errs, Elapsed: max(lastAt-start, duration)}
}

// OpenSync is Open with one caller that waits for each reply before the
// next send (the way a naive benchmark loop works); latencies are measured
// from the intended send time, which is what corrects the coordinated
// omission of the requests a slow reply held back.
func OpenSync(ctx context.Context, clk Clock, rate float64, duration time.Duration, call Call) Result {
	rec := NewRecorder()
	start := clk.Now()
	var sent, errs int64
	var last time.Duration
	for i := int64(0); ; i++ {
		at := Schedule(start, rate, i)
		if at-start >= duration || ctx.Err() != nil {
			break
		}
		clk.SleepUntil(at)
		sent++
		err := call(ctx)
		last = clk.Now()
		if err != nil {
			errs++
			continue
		}
		rec.Record(last - at)
	}
	return Result{Latency: rec.Summary(), Sent: sent, Errors: errs, Elapsed: max(last-start, duration)}
}

// Closed keeps inflight requests outstanding for duration: each of
// inflight workers sends its next request as soon as its reply arrived.
func Closed(ctx context.Context, clk Clock, inflight int, duration time.Duration, call Call) Result {
	rec := NewRecorder()
	start := clk.Now()
	end := start + duration
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent, errs int64
	for w := 0; w < max(inflight, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s, e int64
			for ctx.Err() == nil {
				t0 := clk.Now()
				if t0 >= end {
					break
				}
				s++
				if err := call(ctx); err != nil {
					e++
					continue
				}
				rec.Record(clk.Now() - t0)
			}
			mu.Lock()
			sent += s
			errs += e
			mu.Unlock()
		}()
	}
	wg.Wait()
	return Result{Latency: rec.Summary(), Sent: sent, Errors: errs, Elapsed: clk.Now() - start}
}

// Burst reproduces the harness of "Request-Response Olympics": calls goroutines each sleep a random
// whole number of seconds below seconds, then make one call, timed from
// its own start. About calls/seconds requests therefore start together at
// every second boundary; it is not a steady rate. sleep is time.Sleep in
// real runs (the article's goroutines slept, so timer overshoot is part of
// what it measured).
func Burst(ctx context.Context, clk Clock, sleep func(time.Duration), rng *rand.Rand, calls, seconds int, call Call) Result {
	rec := NewRecorder()
	start := clk.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs int64
	delays := make([]time.Duration, calls)
	for i := range delays {
		delays[i] = time.Duration(rng.IntN(max(seconds, 1))) * time.Second
	}
	for _, d := range delays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleep(d)
			if ctx.Err() != nil {
				return
			}
			t0 := clk.Now()
			err := call(ctx)
			lat := clk.Now() - t0
			if err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
				return
			}
			rec.Record(lat)
		}()
	}
	wg.Wait()
	return Result{Latency: rec.Summary(), Sent: int64(calls), Errors: errs, Elapsed: clk.Now() - start}
}
