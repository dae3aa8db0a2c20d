// Command rrpeer is rsocket-go v0.8.16's echo server for `sluice bench rr`
// (protocol rsocket-go). It lives in this separate module so that
// rsocket-go never enters sluice's own go.mod.
//
//	rrpeer serve [--addr 127.0.0.1:0]
//	rrpeer client --addr HOST:PORT [--mode burst|open|closed] [--api block|async] [--inflight N] [--rate N] [--duration D] [--payload N]
//
// It speaks the split-process protocol of sluice's internal/lab/bench/rr: it
// prints "addr HOST:PORT" once it listens, answers each "cpu" line on stdin
// with "cpu MICROSECONDS" (its user+system CPU time so far), and exits at
// EOF on stdin.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	rgo "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/logger"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/mono"
)

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "client" {
		if err := client(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "rrpeer:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: rrpeer serve [--addr 127.0.0.1:0] | rrpeer client --addr HOST:PORT [--mode burst|open|closed] ...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("rrpeer serve", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0: a free one)")
	fs.Parse(os.Args[2:])
	if err := serve(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "rrpeer:", err)
		os.Exit(1)
	}
}

func serve(addr string) error {
	// A client closing its connection is logged as a warning with a stack.
	logger.SetLevel(logger.LevelError)
	// rsocket-go listens itself: find a free port first.
	if strings.HasSuffix(addr, ":0") {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- rgo.Receive().
			OnStart(func() { close(started) }).
			Acceptor(func(context.Context, payload.SetupPayload, rgo.CloseableRSocket) (rgo.RSocket, error) {
				// The payload as is, no copy: rsocket-go's own README echo
				// (mono.Just(msg)) and examples/echo/echo.go
				// (mono.JustOneshot(pl)) in github.com/rsocket/rsocket-go.
				return rgo.NewAbstractSocket(rgo.RequestResponse(func(p payload.Payload) mono.Mono {
					return mono.Just(p)
				})), nil
			}).
			Transport(rgo.TCPServer().SetAddr(addr).Build()).
			Serve(ctx)
	}()
	select {
	case <-started:
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("server did not start")
	}
	fmt.Printf("addr %s\n", addr)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "cpu" {
			var ru syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			fmt.Printf("cpu %d\n", (ru.Utime.Nano()+ru.Stime.Nano())/1000)
		}
	}
	return nil
}
