package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
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
	params := map[string]any{"servers": *servers, "slowed": *slowed, "slow_s": slow.Seconds(),
		"inflight": *inflight, "duration_s": dur.Seconds()}
	var rs bench.Results
	for _, step := range bench.RepOrder(bf.reps, len(pols)) {
		pol := pols[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s: %s ...\n", step.Rep+1, bf.reps, pol, *dur)
		res, err := bench.RunLB(ctx, bench.LBConfig{Policy: pol, Servers: *servers, Slowed: *slowed, Slow: *slow,
			InFlight: *inflight, Duration: *dur, Seed: int64(step.Rep + 1)})
		if err != nil {
			return err
		}
		var total int64
		for _, n := range res.PerServer {
			total += n
		}
		m := bench.Metrics{
			"requests_per_sec": float64(res.Requests) / res.Elapsed.Seconds(),
			"errors":           float64(res.Errors),
			"p50_s":            res.P50.Seconds(), "p90_s": res.P90.Seconds(),
			"p99_s": res.P99.Seconds(), "p999_s": res.P999.Seconds(), "max_s": res.Max.Seconds(),
		}
		var slowN int64
		for i, n := range res.PerServer {
			m[fmt.Sprintf("share_server%d", i)] = float64(n) / float64(total)
			if i < *slowed {
				slowN += n
			}
		}
		m["slow_share"] = float64(slowN) / float64(total)
		rs.Add(pol.String(), map[string]any{"policy": pol.String()}, m)
	}
	fmt.Fprintf(stdout, "\n%s; %d echo servers (%d slowed by %s), %d in flight, %s per run\n\n", repsLine(bf.reps), *servers, *slowed, *slow, *inflight, *dur)
	fmt.Fprint(stdout, "| policy | requests/s | share of slowed | share per server | p50 | p90 | p99 | p99.9 | errors |\n|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, pol := range pols {
		r := rs.Row(pol.String())
		shares := make([]string, *servers)
		for i := range shares {
			shares[i] = fmt.Sprintf("%.1f%%", 100*r.Stat(fmt.Sprintf("share_server%d", i)).Median)
			if i < *slowed {
				shares[i] += " (slow)"
			}
		}
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("requests_per_sec").Format(0),
			pct1(r.Stat("slow_share")), strings.Join(shares, " / "),
			r.Stat("p50_s").FormatDuration(), r.Stat("p90_s").FormatDuration(), r.Stat("p99_s").FormatDuration(),
			r.Stat("p999_s").FormatDuration(), r.Stat("errors").Format(0))
	}
	fmt.Fprintln(stdout, "\nLatency: request-response as the client saw it (HdrHistogram, µs resolution); shares: requests each server answered.")
	return bf.write("bench lb", args, params, rs, nil)
}

// pct1 is pct with one decimal: the slowed server's share is a few percent.
func pct1(s bench.Stat) string {
	if s.N == 0 {
		return ""
	}
	if s.N == 1 {
		return fmt.Sprintf("%.1f%%", 100*s.Median)
	}
	return fmt.Sprintf("%.1f%% (%.1f–%.1f%%)", 100*s.Median, 100*s.Min, 100*s.Max)
}
