// Package lbbench is `sluice bench lb`: RSocket client-side load
// balancing policies side by side against in-process echo servers, some
// of them slowed, reporting throughput, latency and each server's share.
package lbbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/rsocket/balance"
)

// Config is one `sluice bench lb`.
type Config struct {
	Duration time.Duration // closed-loop time per run
	Slow     time.Duration // delay a slowed server adds to each request
	Servers  int           // echo servers on loopback
	Slowed   int           // how many of them are slowed
	InFlight int           // requests in flight (closed loop)
	Policies []balance.Policy
	Report   benchkit.Report
}

// Run measures every policy, prints the table and writes the report.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	var rs bench.Results
	for _, step := range bench.RepOrder(c.Report.Reps, len(c.Policies)) {
		pol := c.Policies[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s: %s ...\n", step.Rep+1, c.Report.Reps, pol, c.Duration)
		res, err := bench.RunLB(ctx, bench.LBConfig{Policy: pol, Servers: c.Servers, Slowed: c.Slowed, Slow: c.Slow,
			InFlight: c.InFlight, Duration: c.Duration, Seed: int64(step.Rep + 1)})
		if err != nil {
			return err
		}
		rs.Add(pol.String(), map[string]any{"policy": pol.String()}, c.metrics(res))
	}
	c.printTable(stdout, rs)
	params := map[string]any{"servers": c.Servers, "slowed": c.Slowed, "slow_s": c.Slow.Seconds(),
		"inflight": c.InFlight, "duration_s": c.Duration.Seconds()}
	return c.Report.Write(params, rs, nil)
}

func (c Config) metrics(res bench.LBResult) bench.Metrics {
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
		if i < c.Slowed {
			slowN += n
		}
	}
	m["slow_share"] = float64(slowN) / float64(total)
	return m
}

func (c Config) printTable(stdout io.Writer, rs bench.Results) {
	fmt.Fprintf(stdout, "\n%s; %d echo servers (%d slowed by %s), %d in flight, %s per run\n\n", benchkit.RepsLine(c.Report.Reps), c.Servers, c.Slowed, c.Slow, c.InFlight, c.Duration)
	fmt.Fprint(stdout, "| policy | requests/s | share of slowed | share per server | p50 | p90 | p99 | p99.9 | errors |\n|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, pol := range c.Policies {
		r := rs.Row(pol.String())
		shares := make([]string, c.Servers)
		for i := range shares {
			shares[i] = fmt.Sprintf("%.1f%%", 100*r.Stat(fmt.Sprintf("share_server%d", i)).Median)
			if i < c.Slowed {
				shares[i] += " (slow)"
			}
		}
		fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("requests_per_sec").Format(0),
			benchkit.Pct1(r.Stat("slow_share")), strings.Join(shares, " / "),
			r.Stat("p50_s").FormatDuration(), r.Stat("p90_s").FormatDuration(), r.Stat("p99_s").FormatDuration(),
			r.Stat("p999_s").FormatDuration(), r.Stat("errors").Format(0))
	}
	fmt.Fprintln(stdout, "\nLatency: request-response as the client saw it (HdrHistogram, µs resolution); shares: requests each server answered.")
}
