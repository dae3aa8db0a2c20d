package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// This file measures sluice's RSocket on one connection, closed loop:
// `sluice bench rsocket` runs it side by side with gRPC bidi
// (rsocket_grpc.go) and rsocket-go (rsocket_peer.go).

// RRResult is one closed-loop request-response run.
type RRResult struct {
	Requests int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	// CPU is the CPU time (user + system) both ends used: on a shared
	// machine a steadier measure of cost than the rate.
	CPU time.Duration
}

// Rate is requests per second.
func (r RRResult) Rate() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Metrics is the run as bench metrics.
func (r RRResult) Metrics() Metrics {
	m := Metrics{"req_per_sec": r.Rate(), "p50_us": float64(r.P50) / 1e3, "p99_us": float64(r.P99) / 1e3, "requests": float64(r.Requests)}
	if r.CPU > 0 && r.Requests > 0 {
		m["cpu_us_per_req"] = float64(r.CPU) / 1e3 / float64(r.Requests)
	}
	return m
}

// withCPU runs f and sets the result's CPU to what this process used.
func withCPU(f func() (RRResult, error)) (RRResult, error) {
	c0 := selfCPU()
	r, err := f()
	r.CPU = selfCPU() - c0
	return r, err
}

// ClosedLoop runs call from inflight goroutines, each starting its next
// call when the last returned, until dur passed or max calls started, and
// records every call's latency.
func ClosedLoop(ctx context.Context, inflight int, dur time.Duration, max int64, call func(ctx context.Context) error) (RRResult, error) {
	if inflight < 1 || dur <= 0 || max < 1 {
		return RRResult{}, errors.New("bench: inflight, duration and max must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, dur+30*time.Second) // a stuck call fails the run
	defer cancel()
	hists := make([]*hdrhistogram.Histogram, inflight)
	var n atomic.Int64
	var firstErr error
	var once sync.Once
	end := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range inflight {
		h := hdrhistogram.New(1, 60_000_000, 3) // ns/100: 100 ns .. 6000 s
		hists[w] = h
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n.Add(1) <= max {
				t := time.Now()
				if t.After(end) {
					return
				}
				if err := call(ctx); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				_ = h.RecordValue(int64(time.Since(t) / 100))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return RRResult{}, firstErr
	}
	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, h := range hists {
		all.Merge(h)
	}
	return RRResult{Requests: all.TotalCount(), Elapsed: el,
		P50: time.Duration(all.ValueAtQuantile(50)) * 100, P99: time.Duration(all.ValueAtQuantile(99)) * 100}, nil
}

// AsyncLoop is ClosedLoop for an asynchronous call: inflight requests are
// started, and each completion starts the next until dur passed, without
// a goroutine per request. call must call done exactly once.
func AsyncLoop(ctx context.Context, inflight int, dur time.Duration, call func(done func(error))) (RRResult, error) {
	return AsyncLanes(ctx, 1, inflight, dur, func(_ int, done func(error)) { call(done) })
}

// AsyncLanes is AsyncLoop over lanes (connections), perLane requests in
// flight on each: call(lane, done) starts one on that lane. Each lane
// records into its own histogram, so that completions on different
// connections, which run at once, do not contend on one lock (that
// measured the bench, not the connections).
func AsyncLanes(ctx context.Context, lanes, perLane int, dur time.Duration, call func(lane int, done func(error))) (RRResult, error) {
	if lanes < 1 || perLane < 1 || dur <= 0 {
		return RRResult{}, errors.New("bench: lanes, in flight and duration must be positive")
	}
	type lane struct {
		mu sync.Mutex // completions of one connection run one at a time; uncontended
		h  *hdrhistogram.Histogram
	}
	var (
		ls       = make([]lane, lanes)
		errMu    sync.Mutex
		firstErr error
		failed   atomic.Bool
		left     atomic.Int64
		finished = make(chan struct{})
	)
	for i := range ls {
		ls[i].h = hdrhistogram.New(1, 60_000_000, 3)
	}
	left.Store(int64(lanes * perLane))
	end := time.Now().Add(dur)
	start := time.Now()
	var one func(l int)
	one = func(l int) {
		t := time.Now()
		if t.After(end) || ctx.Err() != nil || failed.Load() {
			if left.Add(-1) == 0 {
				close(finished)
			}
			return
		}
		call(l, func(err error) {
			ln := &ls[l]
			ln.mu.Lock()
			_ = ln.h.RecordValue(int64(time.Since(t) / 100))
			ln.mu.Unlock()
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				failed.Store(true)
			}
			one(l)
		})
	}
	for l := range lanes {
		for range perLane {
			one(l)
		}
	}
	select {
	case <-finished:
	case <-time.After(dur + 30*time.Second): // a stuck call fails the run
		return RRResult{}, errors.New("bench: async requests stalled")
	}
	el := time.Since(start)
	errMu.Lock()
	defer errMu.Unlock()
	if firstErr != nil {
		return RRResult{}, firstErr
	}
	all := hdrhistogram.New(1, 60_000_000, 3)
	for i := range ls {
		ls[i].mu.Lock()
		all.Merge(ls[i].h)
		ls[i].mu.Unlock()
	}
	return RRResult{Requests: all.TotalCount(), Elapsed: el,
		P50: time.Duration(all.ValueAtQuantile(50)) * 100, P99: time.Duration(all.ValueAtQuantile(99)) * 100}, nil
}

// rsServer serves sluice's echo responder (plus 64 B streams, see
// streamResponder) on a loopback port until ctx ends.
func rsServer(ctx context.Context, size int) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go rsocket.Serve(ctx, ln, &streamResponder{Responder: &echo.Responder{}, elem: make([]byte, size)})
	return "tcp://" + ln.Addr().String(), nil
}

// streamResponder is echo, except that a request-stream with data "n"
// sends n payloads of len(elem) bytes (echo's are "0", "1", ...).
type streamResponder struct {
	*echo.Responder
	elem []byte
}

func (s *streamResponder) RequestStream(ctx context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	n, err := strconv.ParseInt(string(p.Data), 10, 64)
	if err != nil {
		return rsocket.ApplicationError("not a number: %q", p.Data)
	}
	// In batches, as the echo responder does (Sink.SendBatch).
	var ps [64]rsocket.Payload
	for i := range ps {
		ps[i] = rsocket.Payload{Data: s.elem}
	}
	for n > 0 {
		k := min(n, int64(len(ps)))
		if _, err := out.SendBatch(ps[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// SluiceRR is sluice's request-response: its client, one connection, to
// its server, in this process. async: RequestResponseFunc, no goroutine
// per request in flight; else a goroutine blocked in RequestResponse each.
func SluiceRR(ctx context.Context, inflight int, dur time.Duration, size int, async bool) (RRResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, err := rsServer(ctx, size)
	if err != nil {
		return RRResult{}, err
	}
	c, err := rsocket.Dial(ctx, url)
	if err != nil {
		return RRResult{}, err
	}
	defer c.Close()
	p := rsocket.Payload{Data: make([]byte, size)}
	if async {
		return withCPU(func() (RRResult, error) {
			return AsyncLoop(ctx, inflight, dur, func(done func(error)) {
				c.RequestResponseFunc(ctx, p, func(_ rsocket.Payload, err error) { done(err) })
			})
		})
	}
	return withCPU(func() (RRResult, error) {
		return ClosedLoop(ctx, inflight, dur, 1<<40, func(ctx context.Context) error {
			_, err := c.RequestResponse(ctx, p)
			return err
		})
	})
}

// SluiceStream is one request-stream of size-byte payloads, as fast as the
// requester consumes them (credits in batches of batch); it returns
// payloads per second.
func SluiceStream(ctx context.Context, dur time.Duration, size int, batch uint32) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, err := rsServer(ctx, size)
	if err != nil {
		return 0, err
	}
	c, err := rsocket.Dial(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	sctx, scancel := context.WithTimeout(ctx, dur+30*time.Second) // a stalled stream fails the run
	defer scancel()
	s, err := c.RequestStream(sctx, rsocket.Payload{Data: []byte(strconv.Itoa(1 << 30))}, batch)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	end := start.Add(dur)
	n := 0
	for {
		if _, err := s.Next(); err != nil {
			return 0, err
		}
		n++
		if n&1023 == 0 && time.Now().After(end) {
			break
		}
	}
	el := time.Since(start)
	s.Cancel()
	return float64(n) / el.Seconds(), nil
}

// IdleConnBytes opens n idle sluice connections (client and server end
// both in this process) and returns the heap and stack bytes they hold,
// per connection (both ends together).
func IdleConnBytes(ctx context.Context, n int) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, err := rsServer(ctx, 64)
	if err != nil {
		return 0, err
	}
	mem := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse
	}
	p := rsocket.Payload{Data: make([]byte, 64)}
	// Warm up: pools, the first connection's one-off allocations.
	if w, err := rsocket.Dial(ctx, url); err == nil {
		_, _ = w.RequestResponse(ctx, p)
		w.Close()
	}
	before := mem()
	conns := make([]*rsocket.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := rsocket.Dial(ctx, url)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
		// One request each, so both ends are set up and have run once.
		if _, err := c.RequestResponse(ctx, p); err != nil {
			return 0, err
		}
	}
	after := mem()
	return (float64(after) - float64(before)) / float64(n), nil
}

// MultiConnRR is request-response over conns connections with inflight
// requests in flight on each, to the server at url.
func MultiConnRR(ctx context.Context, url string, conns, inflight int, dur time.Duration, size int, async bool) (RRResult, error) {
	cs := make([]*rsocket.Conn, conns)
	for i := range cs {
		c, err := rsocket.Dial(ctx, url)
		if err != nil {
			return RRResult{}, err
		}
		defer c.Close()
		cs[i] = c
	}
	p := rsocket.Payload{Data: make([]byte, size)}
	var next atomic.Uint64
	if async {
		return AsyncLanes(ctx, conns, inflight, dur, func(l int, done func(error)) {
			cs[l].RequestResponseFunc(ctx, p, func(_ rsocket.Payload, err error) { done(err) })
		})
	}
	return ClosedLoop(ctx, conns*inflight, dur, 1<<40, func(ctx context.Context) error {
		_, err := cs[next.Add(1)%uint64(conns)].RequestResponse(ctx, p)
		return err
	})
}

// ProcCPU is the CPU time (user + system) process pid used so far; 0 if
// unknown.
func ProcCPU(pid int) time.Duration { return procCPU(pid) }

// SelfCPU is the CPU time this process used so far.
func SelfCPU() time.Duration { return selfCPU() }

// RSSHighWater returns a process's peak resident set (VmHWM) in bytes.
func RSSHighWater(pid int) (int64, error) { return procStatusKB(pid, "VmHWM:") }

func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			var kb int64
			if _, err := fmt.Sscanf(v, "%d", &kb); err != nil {
				return 0, fmt.Errorf("%s: %q: %w", field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
