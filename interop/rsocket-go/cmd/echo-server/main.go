// Command echo-server serves rsocket-go v0.8.16 with the echo contract of
// `sluice rsocket serve`, for running `sluice rsocket tck` against
// rsocket-go (docs/rsocket-conformance.md):
//
//	cd interop/rsocket-go && GOWORK=off go run ./cmd/echo-server -addr 127.0.0.1:7878 [-ws]
//
// It prints "listening tcp://ADDR" (or ws://ADDR/) once it serves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"

	rgo "github.com/rsocket/rsocket-go"
	"github.com/rsocket/rsocket-go/payload"
	"github.com/rsocket/rsocket-go/rx/flux"
	"github.com/rsocket/rsocket-go/rx/mono"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7878", "listen address")
	ws := flag.Bool("ws", false, "serve WebSocket at / instead of TCP")
	flag.Parse()
	tp := rgo.TCPServer().SetAddr(*addr).Build()
	shown := "tcp://" + *addr
	if *ws {
		tp = rgo.WebsocketServer().SetAddr(*addr).SetPath("/").Build()
		shown = "ws://" + *addr + "/"
	}
	err := rgo.Receive().
		Fragment(64 * 1024).
		OnStart(func() { fmt.Println("listening", shown) }).
		Acceptor(func(context.Context, payload.SetupPayload, rgo.CloseableRSocket) (rgo.RSocket, error) {
			return echo(), nil
		}).
		Transport(tp).
		Serve(context.Background())
	log.Fatal(err)
}

func echo() rgo.RSocket {
	return rgo.NewAbstractSocket(
		rgo.MetadataPush(func(payload.Payload) {}),
		rgo.FireAndForget(func(payload.Payload) {}),
		rgo.RequestResponse(func(p payload.Payload) mono.Mono {
			if msg, ok := strings.CutPrefix(string(p.Data()), "error:"); ok {
				return mono.Error(errors.New(msg))
			}
			// The payload as is, no copy, as rsocket-go's README echo
			// (mono.Just(msg)) and examples/echo/echo.go do.
			return mono.Just(p)
		}),
		rgo.RequestStream(func(p payload.Payload) flux.Flux {
			n, err := strconv.Atoi(string(p.Data()))
			if err != nil {
				return flux.Error(fmt.Errorf("stream data %q is not a number of elements", p.Data()))
			}
			return flux.Create(func(ctx context.Context, s flux.Sink) {
				for i := 0; i < n; i++ {
					select {
					case <-ctx.Done():
						return
					default:
					}
					s.Next(payload.New([]byte(strconv.Itoa(i)), nil))
				}
				s.Complete()
			})
		}),
		rgo.RequestChannel(func(in flux.Flux) flux.Flux {
			return in.Map(func(p payload.Payload) (payload.Payload, error) { return payload.Clone(p), nil })
		}),
	)
}
