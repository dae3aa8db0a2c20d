package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// echoClient is one Redis client library behind the ECHO command.
type echoClient interface {
	echo(ctx context.Context, p []byte) error
	close()
}

// client drives go-redis or rueidis the way sluice's internal/lab/bench/rr
// drives its in-process contestants (that package is internal to sluice's
// module, so its three loops are repeated here, small, as in
// interop/rsocket-go/cmd/rrpeer), and prints one line: "result count=N
// errors=N elapsed_us=N p50_us=N p90_us=N p99_us=N p999_us=N max_us=N
// cpu_us=N".
func client(args []string) error {
	fs := flag.NewFlagSet("redispeer client", flag.ExitOnError)
	addr := fs.String("addr", "", "server HOST:PORT")
	lib := fs.String("lib", "", "go-redis (a pool of --conns connections) or rueidis (auto-pipelining on one connection)")
	resp3 := fs.Bool("resp3", false, "rueidis: speak RESP3 (redis-server; redcon has no HELLO 3)")
	conns := fs.Int("conns", 0, "go-redis: pool size (0: the library's default)")
	mode := fs.String("mode", "closed", "burst, open or closed")
	inflight := fs.Int("inflight", 1, "closed: requests in flight")
	rate := fs.Float64("rate", 100, "open: intended requests per second")
	dur := fs.Duration("duration", 3*time.Second, "open and closed: measured time")
	size := fs.Int("payload", 64, "payload bytes")
	burstSeconds := fs.Int("burst-seconds", 6, "burst: spread in whole seconds, 100 calls per second")
	seed := fs.Uint64("seed", 1, "burst: random seed")
	warmup := fs.Duration("warmup", 300*time.Millisecond, "unmeasured closed-loop warm-up (0: none)")
	fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *addr == "" || *inflight < 1 || *rate <= 0 || *dur <= 0 || *size < 0 || *burstSeconds < 1 || *conns < 0 {
		return errors.New("bad flags (need --addr; positive --inflight, --rate, --duration, --burst-seconds)")
	}
	c, err := dial(*lib, *addr, *conns, *resp3)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), *dur+time.Duration(*burstSeconds)*time.Second+2*time.Minute)
	defer cancel()
	data := make([]byte, *size)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	call := func() error { return c.echo(ctx, data) }
	var rec recorder
	// Warm-up, not measured: the same as every in-process client's in
	// `sluice bench rr`.
	closed(*inflight, *warmup, call, func(time.Duration, error) {})
	cpu0 := cpuTime()
	start := time.Now()
	var spun time.Duration
	switch *mode {
	case "closed":
		closed(*inflight, *dur, call, rec.record)
	case "open":
		spun = open(*rate, *dur, call, rec.record)
	case "burst":
		burst(rand.New(rand.NewPCG(*seed, 3)), *burstSeconds, call, rec.record)
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	elapsed := max(time.Since(start), *dur)
	if *mode == "burst" {
		elapsed = time.Since(start)
	}
	// The open-loop pacer's spinning is the generator's cost, not the
	// client's.
	cpu := max(cpuTime()-cpu0-spun, 0)
	rec.print(elapsed, cpu)
	return nil
}

// dial makes the client exactly as the olympics set it up (docs/olympics.md,
// "Each competitor's settings").
func dial(lib, addr string, conns int, resp3 bool) (echoClient, error) {
	switch lib {
	case "go-redis":
		// RESP2 and no CLIENT SETINFO: redcon knows neither HELLO nor
		// CLIENT, and redis-server is run the same way for a fair pair.
		opt := &redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true}
		if conns > 0 {
			opt.PoolSize = conns
			opt.MinIdleConns = 0
		}
		return goRedis{redis.NewClient(opt)}, nil
	case "rueidis":
		// One connection (PipelineMultiplex -1: rueidis' default would open
		// log2(GOMAXPROCS)), auto-pipelined: every command queued while the
		// last write was under way goes out in the next one (its README,
		// "Auto Pipelining").
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:       []string{addr},
			ForceSingleClient: true,
			PipelineMultiplex: -1,
			AlwaysRESP2:       !resp3,
			DisableCache:      true, // client-side caching needs RESP3 and is no part of an echo
			ClientSetInfo:     rueidis.DisableClientSetInfo,
		})
		if err != nil {
			return nil, err
		}
		return rueidisClient{c}, nil
	}
	return nil, fmt.Errorf("--lib %q: go-redis or rueidis", lib)
}

type goRedis struct{ c *redis.Client }

func (g goRedis) echo(ctx context.Context, p []byte) error {
	s, err := g.c.Echo(ctx, p).Result()
	if err == nil && s != string(p) {
		err = fmt.Errorf("echo: reply of %d bytes is not the request", len(s))
	}
	return err
}

func (g goRedis) close() { g.c.Close() }

type rueidisClient struct{ c rueidis.Client }

func (r rueidisClient) echo(ctx context.Context, p []byte) error {
	b, err := r.c.Do(ctx, r.c.B().Echo().Message(rueidis.BinaryString(p)).Build()).AsBytes()
	if err == nil && !bytes.Equal(b, p) {
		err = fmt.Errorf("echo: reply of %d bytes is not the request", len(b))
	}
	return err
}

func (r rueidisClient) close() { r.c.Close() }

// recorder keeps every latency (a run is at most a few million) and the
// count of failed calls.
type recorder struct {
	mu   sync.Mutex
	lat  []time.Duration
	errs int
}

func (r *recorder) record(d time.Duration, err error) {
	r.mu.Lock()
	if err != nil {
		r.errs++
	} else {
		r.lat = append(r.lat, d)
	}
	r.mu.Unlock()
}

// print writes the result line sluice's bench rr reads.
func (r *recorder) print(elapsed, cpu time.Duration) {
	slices.Sort(r.lat)
	q := func(p float64) int64 {
		if len(r.lat) == 0 {
			return 0
		}
		return r.lat[min(int(p*float64(len(r.lat))), len(r.lat)-1)].Microseconds()
	}
	fmt.Printf("result count=%d errors=%d elapsed_us=%d p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d cpu_us=%d\n",
		len(r.lat), r.errs, elapsed.Microseconds(), q(0.5), q(0.9), q(0.99), q(0.999), q(1), cpu.Microseconds())
}
