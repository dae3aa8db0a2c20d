package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench/rr"
	"github.com/sluicehq/sluice/internal/lab/rrbench"
)

func init() {
	register("bench rr", "request-response protocols compared as in \"Request-Response Olympics\" beside raw TCP, the physical limit: burst (its harness), open and closed loop", runBenchRR)
	register("bench rr-server", "(internal) the echo server of one protocol for `bench rr --split`", runBenchRRServer)
}

func runBenchRR(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench rr", "[--protocols LIST] [--mode burst|open|closed] [--rate N] [--inflight LIST] [--duration D] [--reps N] [--payload SIZE] [--split] [--json FILE] [--svg FILE] [flags]", stderr)
	protos := fs.String("protocols", rr.ProtocolNames(), "comma-separated contestants (tcp is the coalescing raw TCP limit every row is reported against, tcp-naive one write per request)")
	modes := fs.String("mode", "open", "burst, open or closed (comma-separated for several)")
	rate := fs.Float64("rate", 100, "open loop: intended requests per second")
	inflightList := fs.String("inflight", "1,16,128,1024", "closed loop: requests in flight on one connection (comma-separated)")
	dur := fs.Duration("duration", 3*time.Second, "open and closed loop: measured time of each rep")
	payload := byteSize(64)
	fs.Var(&payload, "payload", "request (and reply) payload size")
	split := fs.Bool("split", false, "run each server in its own process (`sluice bench rr-server`) and report its CPU separately")
	burstSeconds := fs.Int("burst-seconds", 6, "burst: spread of the random whole-second sleeps before each call; 100 calls per second of spread (\"Request-Response Olympics\" used 60, i.e. 6,000 calls)")
	svgPath := fs.String("svg", "", "write a chart (latency percentiles per protocol; throughput against requests in flight) to this SVG file")
	rrpeer := fs.String("rrpeer", "", "rsocket-go echo server binary (default: build interop/rsocket-go/cmd/rrpeer)")
	bf := addBenchFlags(fs)
	fs.Lookup("reps").DefValue = "5"
	bf.reps = 5
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	if *rate <= 0 || *dur <= 0 || payload < 0 || *burstSeconds < 1 {
		return &exitError{code: 2, msg: "--rate, --duration and --burst-seconds must be positive, --payload not negative"}
	}
	var inflights []int
	for _, s := range strings.Split(*inflightList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return &exitError{code: 2, msg: fmt.Sprintf("--inflight: %q is not a positive number", s)}
		}
		inflights = append(inflights, n)
	}
	self, _ := os.Executable()
	cfg := rrbench.Config{Protocols: strings.Split(*protos, ","), Modes: strings.Split(*modes, ","), Rate: *rate, InFlights: inflights,
		Duration: *dur, Payload: int(payload), Split: *split, BurstSeconds: *burstSeconds, SVGPath: *svgPath, RRPeer: *rrpeer,
		Self: self, Report: bf.report("bench rr", args)}
	if err := cfg.Validate(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	ctx, stop := signalContext()
	defer stop()
	return rrbench.Run(ctx, cfg, stdout, stderr)
}

func runBenchRRServer(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench rr-server", "--protocol NAME", stderr)
	name := fs.String("protocol", "", "the protocol to serve")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	p, ok := rr.Lookup(*name)
	if !ok || p.Serve == nil {
		return &exitError{code: 2, msg: fmt.Sprintf("--protocol: %q is not served in-process (known: %s)", *name, rr.ProtocolNames())}
	}
	ctx, stop := signalContext()
	defer stop()
	addr, stopSrv, err := p.Serve(ctx)
	if err != nil {
		return err
	}
	defer stopSrv()
	return rr.ServeStdio(addr, os.Stdin, stdout)
}
