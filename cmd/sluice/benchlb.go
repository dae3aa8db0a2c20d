package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/lbbench"
	"github.com/sluicehq/sluice/rsocket/balance"
)

func init() {
	register("bench lb", "RSocket client-side load balancing: predictive (P2C over EWMA × load) vs round-robin, one echo server slowed", runBenchLB)
}

func runBenchLB(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench lb", "[flags]", stderr)
	dur := fs.Duration("duration", 3*time.Second, "closed-loop time per run")
	slow := fs.Duration("slow", 20*time.Millisecond, "delay the slowed server adds to each request-response")
	servers := fs.Int("servers", 3, "in-process echo servers on loopback TCP")
	slowed := fs.Int("slowed", 1, "how many of them are slowed")
	inflight := fs.Int("inflight", 16, "requests in flight (closed loop)")
	policies := fs.String("policy", "predictive,round-robin", "comma-separated runs: predictive, round-robin")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	switch {
	case *servers < 1 || *servers > 64:
		return &exitError{code: 2, msg: "--servers must be in 1..64"}
	case *slowed < 0 || *slowed > *servers:
		return &exitError{code: 2, msg: "--slowed must be in 0..--servers"}
	case *inflight < 1 || *inflight > 10000:
		return &exitError{code: 2, msg: "--inflight must be in 1..10000"}
	case *dur <= 0 || *dur > time.Hour:
		return &exitError{code: 2, msg: "--duration must be in (0, 1h]"}
	case *slow < 0:
		return &exitError{code: 2, msg: "--slow must not be negative"}
	}
	var pols []balance.Policy
	for _, p := range strings.Split(*policies, ",") {
		switch strings.TrimSpace(p) {
		case "predictive":
			pols = append(pols, balance.Predictive)
		case "round-robin", "rr":
			pols = append(pols, balance.RoundRobin)
		default:
			return &exitError{code: 2, msg: fmt.Sprintf("--policy: unknown %q (predictive, round-robin)", p)}
		}
	}
	ctx, cancel := signalContext()
	defer cancel()
	return lbbench.Run(ctx, lbbench.Config{Duration: *dur, Slow: *slow, Servers: *servers, Slowed: *slowed,
		InFlight: *inflight, Policies: pols, Report: bf.report("bench lb", args)}, stdout, stderr)
}
