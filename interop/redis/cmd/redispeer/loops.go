package main

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The three load loops of sluice's internal/lab/bench/rr (loadgen.go),
// repeated: that package is internal to sluice's module.

// closed keeps n calls outstanding for dur: each of n workers sends its
// next call as soon as its reply arrived.
func closed(n int, dur time.Duration, call func() error, record func(time.Duration, error)) {
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				err := call()
				record(time.Since(t0), err)
			}
		}()
	}
	wg.Wait()
}

// open sends at rate from intended times anchored at the start, measures
// from those times, sleeps all but the last 1.2 ms and spins the rest (Go
// timers overshoot); it returns the time spent spinning.
func open(rate float64, dur time.Duration, call func() error, record func(time.Duration, error)) time.Duration {
	start := time.Now()
	var spun time.Duration
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10_000)
	for i := 0; ; i++ {
		at := start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
		if at.Sub(start) >= dur {
			break
		}
		if d := time.Until(at); d > 1200*time.Microsecond {
			time.Sleep(d - 1200*time.Microsecond)
		}
		s0 := time.Now()
		for time.Now().Before(at) {
			runtime.Gosched()
		}
		spun += time.Since(s0)
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := call()
			d := time.Since(at)
			<-sem
			record(d, err)
		}()
	}
	wg.Wait()
	return spun
}

// burst is the harness of "Request-Response Olympics": 100 calls per
// second of spread, each after a random whole-second sleep, timed from its
// own start.
func burst(rng *rand.Rand, seconds int, call func() error, record func(time.Duration, error)) {
	var wg sync.WaitGroup
	for i := 0; i < 100*seconds; i++ {
		d := time.Duration(rng.IntN(seconds)) * time.Second
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(d)
			t0 := time.Now()
			err := call()
			record(time.Since(t0), err)
		}()
	}
	wg.Wait()
}

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
