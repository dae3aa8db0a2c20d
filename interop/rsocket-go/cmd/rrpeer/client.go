package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	rgo "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/logger"
	"github.com/rsocket/rsocket-go/payload"

	"example.com/interop/rsocketgo/internal/asyncrr"
)

// client drives rsocket-go's client the way sluice's internal/lab/bench/rr
// drives the other contestants (that package is internal to sluice's
// module, so its three loops are repeated here, small), and prints one
// line: "result count=N errors=N elapsed_us=N p50_us=N p90_us=N p99_us=N
// p999_us=N max_us=N cpu_us=N".
func client(args []string) error {
	logger.SetLevel(logger.LevelError)
	fs := flag.NewFlagSet("rrpeer client", flag.ExitOnError)
	addr := fs.String("addr", "", "server HOST:PORT")
	mode := fs.String("mode", "closed", "burst, open or closed")
	inflight := fs.Int("inflight", 1, "closed: requests in flight")
	rate := fs.Float64("rate", 100, "open: intended requests per second")
	dur := fs.Duration("duration", 3*time.Second, "open and closed: measured time")
	size := fs.Int("payload", 64, "payload bytes")
	burstSeconds := fs.Int("burst-seconds", 6, "burst: spread in whole seconds, 100 calls per second")
	seed := fs.Uint64("seed", 1, "burst: random seed")
	api := fs.String("api", "block", "block (Block per request, one goroutine per request in flight) or async (SubscribeWith from one goroutine, closed mode only: rsocket-go's own echo benchmark path)")
	warmup := fs.Duration("warmup", 300*time.Millisecond, "unmeasured closed-loop warm-up (0: none)")
	fs.Parse(args)
	if *addr == "" || *inflight < 1 || *rate <= 0 || *dur <= 0 || *size < 0 || *burstSeconds < 1 {
		return fmt.Errorf("bad flags (need --addr; positive --inflight, --rate, --duration, --burst-seconds)")
	}
	if *api != "block" && !(*api == "async" && *mode == "closed") {
		return fmt.Errorf("--api %q: block, or async with --mode closed", *api)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur+time.Duration(*burstSeconds)*time.Second+2*time.Minute)
	defer cancel()
	c, err := rgo.Connect().Transport(rgo.TCPClient().SetAddr(*addr).Build()).Start(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	data := make([]byte, *size)
	call := func() error {
		p, err := c.RequestResponse(payload.New(data, nil)).Block(ctx)
		if err == nil && len(p.Data()) != len(data) {
			err = fmt.Errorf("reply of %d bytes", len(p.Data()))
		}
		return err
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errs int
	record := func(d time.Duration, err error) {
		mu.Lock()
		if err != nil {
			errs++
		} else {
			lat = append(lat, d)
		}
		mu.Unlock()
	}
	runClosed := func(dur time.Duration, record func(time.Duration, error)) {
		if *api == "async" {
			asyncrr.Closed(ctx, c, data, *inflight, time.Now().Add(dur), record)
			return
		}
		closed(*inflight, dur, call, record)
	}
	// Warm-up, not measured: the same as every other client's in `sluice
	// bench rr`.
	runClosed(*warmup, func(time.Duration, error) {})
	cpu0 := cpuTime()
	start := time.Now()
	var spun time.Duration
	switch *mode {
	case "closed":
		runClosed(*dur, record)
	case "open":
		spun = open(*rate, *dur, call, record)
	case "burst":
		rng := rand.New(rand.NewPCG(*seed, 3))
		var wg sync.WaitGroup
		for i := 0; i < 100**burstSeconds; i++ {
			d := time.Duration(rng.IntN(*burstSeconds)) * time.Second
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
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	elapsed := max(time.Since(start), *dur)
	if *mode == "burst" {
		elapsed = time.Since(start)
	}
	cpu := max(cpuTime()-cpu0-spun, 0)
	slices.Sort(lat)
	q := func(p float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		i := min(int(p*float64(len(lat))), len(lat)-1)
		return lat[i].Microseconds()
	}
	fmt.Printf("result count=%d errors=%d elapsed_us=%d p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d cpu_us=%d\n",
		len(lat), errs, elapsed.Microseconds(), q(0.5), q(0.9), q(0.99), q(0.999), q(1), cpu.Microseconds())
	return nil
}

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

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
