package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/rsocketbench"
)

func init() {
	register("bench rsocket", "sluice RSocket vs gRPC bidi vs rsocket-go on one connection: request-response, request-stream, frame codec, idle memory", runBenchRSocket)
}

func runBenchRSocket(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench rsocket", "[--rsocket-go BIN] [flags]", stderr)
	dur := fs.Duration("duration", 3*time.Second, "length of each run")
	inflightList := fs.String("inflight", "1,16,128", "requests in flight on the one connection, comma-separated")
	size := byteSize(64)
	fs.Var(&size, "size", "payload size")
	rsgo := fs.String("rsocket-go", "", "the rsgo-bench peer binary (default: rsgo-bench on PATH or in interop/rsocket-go/; skipped if none)")
	grpcOn := fs.Bool("grpc", true, "also run gRPC bidi ping-pong")
	idle := fs.Int("idle-conns", 1000, "measure memory per idle connection over this many connections (0: skip)")
	multi := fs.Int("conns", 16, "also run request-response over this many connections (128 in flight each) to a `sluice rsocket serve` child process, reporting its peak RSS (0: skip)")
	apiList := fs.String("api", "blocking,async", "sluice's requester API, comma-separated: blocking (a goroutine per request in RequestResponse) and/or async (RequestResponseFunc, callbacks)")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	var inflights []int
	for _, s := range strings.Split(*inflightList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 100_000 {
			return &exitError{code: 2, msg: fmt.Sprintf("--inflight: %q is not a count from 1 to 100000", s)}
		}
		inflights = append(inflights, n)
	}
	var apis []string
	for _, a := range strings.Split(*apiList, ",") {
		a = strings.TrimSpace(a)
		if a != "blocking" && a != "async" {
			return &exitError{code: 2, msg: fmt.Sprintf("--api: %q is neither blocking nor async", a)}
		}
		apis = append(apis, a)
	}
	if *dur <= 0 || size < 1 || size > 1<<20 || *idle < 0 || *idle > 100_000 || *multi < 0 || *multi > 1024 {
		return &exitError{code: 2, msg: "--duration positive, --size 1 B..1 MiB, --idle-conns 0..100000, --conns 0..1024"}
	}
	self, _ := os.Executable()
	ctx, stop := signalContext()
	defer stop()
	return rsocketbench.Run(ctx, rsocketbench.Config{Duration: *dur, InFlights: inflights, Size: int(size), RSGo: *rsgo,
		GRPC: *grpcOn, IdleConns: *idle, Conns: *multi, APIs: apis, Self: self, Report: bf.report("bench rsocket", args)}, stdout, stderr)
}
