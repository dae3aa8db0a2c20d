package bench

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/balance"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// LBConfig is one run of `sluice bench lb`: Servers in-process echo
// servers on loopback TCP, the first Slowed ones answering request-response
// Slow late, and InFlight closed-loop requesters for Duration.
type LBConfig struct {
	Policy   balance.Policy
	Servers  int
	Slowed   int
	Slow     time.Duration
	InFlight int
	Duration time.Duration
	Seed     int64
}

// LBResult is what one run measured.
type LBResult struct {
	PerServer                []int64 // requests each server answered, slowed ones first
	Requests                 int64
	Errors                   int64
	Elapsed                  time.Duration
	P50, P90, P99, P999, Max time.Duration
}

// lbSlowEcho answers as echo does, Slow later. It embeds the Responder
// interface, not *echo.Responder: that would promote echo's NonBlocking
// marker, and the driver would then run the delay on the connection's
// reader, serializing every request of the connection behind it (a
// server with a capacity of 1/Slow per second instead of a slow one).
type lbSlowEcho struct {
	rsocket.Responder
	slow time.Duration
}

func (s lbSlowEcho) RequestResponse(ctx context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	out, err := s.Responder.RequestResponse(ctx, p)
	t := time.NewTimer(s.slow)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return rsocket.Payload{}, ctx.Err()
	}
	return out, err
}

// RunLB starts the servers, balances InFlight requesters over them with
// cfg.Policy for cfg.Duration and stops everything.
func RunLB(ctx context.Context, cfg LBConfig) (LBResult, error) {
	if cfg.Servers < 1 || cfg.InFlight < 1 || cfg.Duration <= 0 || cfg.Slowed > cfg.Servers {
		return LBResult{}, fmt.Errorf("bench lb: bad config %+v", cfg)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	counts := make([]atomic.Int64, cfg.Servers)
	urls := make([]string, cfg.Servers)
	for i := range cfg.Servers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return LBResult{}, err
		}
		e := &echo.Responder{Hooks: echo.Hooks{Request: func(string) { counts[i].Add(1) }}}
		var r rsocket.Responder = e
		if i < cfg.Slowed {
			r = lbSlowEcho{Responder: e, slow: cfg.Slow}
		}
		go rsocket.Serve(sctx, ln, r)
		urls[i] = "tcp://" + ln.Addr().String()
	}
	c, err := balance.Dial(ctx, urls, balance.WithPolicy(cfg.Policy), balance.WithSeed(cfg.Seed))
	if err != nil {
		return LBResult{}, err
	}
	defer c.Close()

	var mu sync.Mutex
	hist := hdrhistogram.New(1, 60_000_000, 3) // microseconds
	var nErr atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(cfg.Duration)
	for range cfg.InFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := hdrhistogram.New(1, 60_000_000, 3)
			p := rsocket.Payload{Data: []byte("ping")}
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := c.RequestResponse(rctx, p)
				cancel()
				if err != nil {
					nErr.Add(1)
					continue
				}
				_ = local.RecordValue(max(time.Since(t0).Microseconds(), 1))
			}
			mu.Lock()
			hist.Merge(local)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := LBResult{Elapsed: time.Since(start), Errors: nErr.Load(), Requests: hist.TotalCount(),
		PerServer: make([]int64, cfg.Servers)}
	for i := range counts {
		res.PerServer[i] = counts[i].Load()
	}
	us := func(q float64) time.Duration { return time.Duration(hist.ValueAtQuantile(q)) * time.Microsecond }
	res.P50, res.P90, res.P99, res.P999 = us(50), us(90), us(99), us(99.9)
	res.Max = time.Duration(hist.Max()) * time.Microsecond
	return res, ctx.Err()
}
