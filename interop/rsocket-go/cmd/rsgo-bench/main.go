// Command rsgo-bench measures rsocket-go v0.8.16 on one connection, for
// `sluice bench rsocket` to compare with: its client against its own
// server (or, with -addr, against any RSocket server), closed loop, 64 B
// payloads. It lives in this separate module so that rsocket-go never
// enters sluice's go.mod. Build: cd interop/rsocket-go && go build -o
// /tmp/rsgo-bench ./cmd/rsgo-bench
//
// It prints one JSON object on stdout:
//
//	rr:     (-api block|async) {"requests":N,"elapsed_s":S,"p50_us":X,"p99_us":Y}
//	stream: {"payloads":N,"elapsed_s":S}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rgo "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx"
	"github.com/rsocket/rsocket-go/rx/flux"
	"github.com/rsocket/rsocket-go/rx/mono"

	"example.com/interop/rsocketgo/internal/asyncrr"
)

func main() {
	mode := flag.String("mode", "rr", "rr (request-response, closed loop) or stream (request-stream throughput)")
	inflight := flag.Int("inflight", 1, "rr: requests in flight")
	dur := flag.Duration("duration", 3*time.Second, "how long to measure")
	size := flag.Int("size", 64, "payload bytes")
	addr := flag.String("addr", "", "server HOST:PORT (default: start rsocket-go's own echo server on loopback)")
	maxReq := flag.Int64("max", 50_000_000, "stop after this many requests or payloads")
	api := flag.String("api", "block", "rr: block (Block per request, a goroutine per request in flight) or async (SubscribeWith from one goroutine, as rsocket-go's examples/echo_bench does)")
	flag.Parse()
	if *api != "block" && *api != "async" {
		fmt.Fprintln(os.Stderr, "rsgo-bench: -api is block or async")
		os.Exit(2)
	}
	if err := run(*mode, *api, *inflight, *dur, *size, *addr, *maxReq); err != nil {
		fmt.Fprintln(os.Stderr, "rsgo-bench:", err)
		os.Exit(1)
	}
}

func run(mode, api string, inflight int, dur time.Duration, size int, addr string, maxReq int64) error {
	if inflight < 1 || dur <= 0 || size < 0 || maxReq < 1 {
		return errors.New("-inflight, -duration, -max must be positive, -size not negative")
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+60*time.Second)
	defer cancel()
	if addr == "" {
		var err error
		if addr, err = serve(ctx, size); err != nil {
			return err
		}
	}
	c, err := rgo.Connect().Transport(rgo.TCPClient().SetAddr(addr).Build()).Start(ctx)
	if err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	defer c.Close()
	data := make([]byte, size)
	enc := json.NewEncoder(os.Stdout)
	switch mode {
	case "rr":
		var n atomic.Int64
		lat := make([][]time.Duration, inflight)
		end := time.Now().Add(dur)
		start := time.Now()
		var wg sync.WaitGroup
		var firstErr atomic.Pointer[error] // atomic.Value panics on errors of different types
		if api == "async" {
			// One goroutine issues and records until the end; -max bounds
			// what is recorded.
			asyncrr.Closed(ctx, c, data, inflight, end, func(d time.Duration, err error) {
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				if n.Add(1) <= maxReq {
					lat[0] = append(lat[0], d)
				}
			})
			inflight = 0 // no blocking workers
		}
		for w := range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) && n.Add(1) <= maxReq {
					t := time.Now()
					if _, err := c.RequestResponse(payload.New(data, nil)).Block(ctx); err != nil {
						firstErr.CompareAndSwap(nil, &err)
						return
					}
					lat[w] = append(lat[w], time.Since(t))
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		if p := firstErr.Load(); p != nil {
			return *p
		}
		all := slices.Concat(lat...)
		slices.Sort(all)
		if len(all) == 0 {
			return errors.New("no request completed")
		}
		us := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))]) / 1e3 }
		return enc.Encode(map[string]float64{"requests": float64(len(all)), "elapsed_s": el.Seconds(), "p50_us": us(0.50), "p99_us": us(0.99)})
	case "stream":
		var got atomic.Int64
		sctx, scancel := context.WithTimeout(ctx, dur)
		defer scancel()
		start := time.Now()
		done := make(chan struct{})
		c.RequestStream(payload.New([]byte(strconv.FormatInt(maxReq, 10)), nil)).
			DoOnNext(func(payload.Payload) error {
				if got.Add(1) >= maxReq {
					scancel()
				}
				return nil
			}).
			DoFinally(func(rx.SignalType) { close(done) }).
			Subscribe(sctx)
		select {
		case <-done:
		case <-sctx.Done():
		}
		el := time.Since(start)
		return enc.Encode(map[string]float64{"payloads": float64(got.Load()), "elapsed_s": el.Seconds()})
	}
	return fmt.Errorf("unknown -mode %q", mode)
}

// serve starts rsocket-go's echo server (request-response echoes; a
// request-stream with data "n" sends n payloads of size bytes) on a free
// loopback port and returns its address once it started.
func serve(ctx context.Context, size int) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close() // rsocket-go listens itself
	elem := make([]byte, size)
	sock := rgo.NewAbstractSocket(
		// The payload as is, no copy, as rsocket-go's README echo
		// (mono.Just(msg)) and examples/echo/echo.go do.
		rgo.RequestResponse(func(p payload.Payload) mono.Mono { return mono.Just(p) }),
		rgo.RequestStream(func(p payload.Payload) flux.Flux {
			n, _ := strconv.ParseInt(string(p.Data()), 10, 64)
			return flux.Create(func(ctx context.Context, s flux.Sink) {
				for i := int64(0); i < n; i++ {
					if ctx.Err() != nil {
						return
					}
					s.Next(payload.New(elem, nil))
				}
				s.Complete()
			})
		}),
	)
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- rgo.Receive().
			OnStart(func() { close(started) }).
			Acceptor(func(context.Context, payload.SetupPayload, rgo.CloseableRSocket) (rgo.RSocket, error) {
				return sock, nil
			}).
			Transport(rgo.TCPServer().SetAddr(addr).Build()).
			Serve(ctx)
	}()
	select {
	case <-started:
		return addr, nil
	case err := <-errc:
		return "", fmt.Errorf("rsocket-go server: %w", err)
	case <-time.After(30 * time.Second):
		return "", errors.New("rsocket-go server did not start")
	}
}
