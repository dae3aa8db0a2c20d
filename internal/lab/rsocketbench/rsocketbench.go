// Package rsocketbench is `sluice bench rsocket`: sluice's RSocket
// against gRPC bidi streaming and rsocket-go on one connection
// (request-response, request-stream), its frame codec, its memory per
// idle connection, and many connections to a server in its own process.
package rsocketbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/testkit/peerbuild"
)

// Config is one `sluice bench rsocket`.
type Config struct {
	Duration  time.Duration // length of each run
	InFlights []int         // requests in flight on the one connection
	Size      int           // payload size
	RSGo      string        // rsgo-bench peer ("": on PATH or in interop/rsocket-go; skipped if none)
	GRPC      bool          // also run gRPC bidi ping-pong
	IdleConns int           // connections for the idle-memory figure (0: skip)
	Conns     int           // connections to a child `Self rsocket serve` (0: skip)
	APIs      []string      // blocking, async
	Self      string        // this binary
	Report    benchkit.Report
}

const (
	nameStream   = "sluice request-stream"
	nameStreamGo = "rsocket-go request-stream"
	nameFrame    = "sluice frame codec, PAYLOAD"
	nameIdle     = "sluice idle connection"
)

// config is one row and how to measure it.
type config struct {
	name   string
	params map[string]any
	run    func() (bench.Metrics, error)
}

func rrName(who string, n int) string {
	return fmt.Sprintf("%s request-response, %d in flight", who, n)
}

// sluiceName: the blocking API keeps the historical row name; async rows
// say so.
func sluiceName(api string) string {
	if api == "async" {
		return "sluice (async API)"
	}
	return "sluice"
}

// rsgoName is rsocket-go's row for sluice's api: its blocking Block
// keeps the historical row name, its async SubscribeWith says so.
func rsgoName(api string) string {
	if api == "async" {
		return "rsocket-go (async API)"
	}
	return "rsocket-go"
}

// rsgoAPI is rsgo-bench's -api for sluice's api name.
func rsgoAPI(api string) string {
	if api == "async" {
		return "async"
	}
	return "block"
}

func (c Config) multiName(api string) string {
	return fmt.Sprintf("%s request-response, %d connections × 128 in flight, server in its own process", sluiceName(api), c.Conns)
}

// Run measures, prints the tables and notes, and writes the report.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	if c.RSGo == "" {
		c.RSGo = peerbuild.RSGoBench()
	}
	if c.RSGo == "" {
		fmt.Fprintf(stderr, "rsocket-go: skipped: build it with %s\n", peerbuild.RSGoBenchBuildHint)
	}
	configs := append(c.rrConfigs(ctx), c.otherConfigs(ctx)...)
	var rs bench.Results
	for _, step := range bench.RepOrder(c.Report.Reps, len(configs)) {
		cf := configs[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s ...\n", step.Rep+1, c.Report.Reps, cf.name)
		m, err := cf.run()
		if err != nil {
			return fmt.Errorf("%s: %w", cf.name, err)
		}
		rs.Add(cf.name, cf.params, m)
	}
	c.ratios(rs)
	c.printTables(stdout, rs, configs)
	notes := c.notes(rs)
	fmt.Fprintln(stdout)
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	return c.Report.Write(map[string]any{"payload_bytes": c.Size, "duration_s": c.Duration.Seconds()}, rs, notes)
}

// rrConfigs are the one-connection request-response rows.
func (c Config) rrConfigs(ctx context.Context) []config {
	var configs []config
	for _, n := range c.InFlights {
		for _, api := range c.APIs {
			configs = append(configs, config{rrName(sluiceName(api), n), map[string]any{"stack": "sluice", "inflight": n, "api": api}, func() (bench.Metrics, error) {
				r, err := bench.SluiceRR(ctx, n, c.Duration, c.Size, api == "async")
				return r.Metrics(), err
			}})
		}
		if c.GRPC {
			configs = append(configs, config{rrName("gRPC bidi", n), map[string]any{"stack": "grpc-go bidi", "inflight": n}, func() (bench.Metrics, error) {
				r, err := bench.GRPCBidi(ctx, n, c.Duration, c.Size)
				return r.Metrics(), err
			}})
		}
		if c.RSGo != "" {
			for _, api := range c.APIs {
				configs = append(configs, config{rrName(rsgoName(api), n), map[string]any{"stack": "rsocket-go v0.8.16", "inflight": n, "api": api}, func() (bench.Metrics, error) {
					m, err := bench.RSocketGo(ctx, c.RSGo, "rr", rsgoAPI(api), n, c.Duration, c.Size)
					return bench.PeerRR(m).Metrics(), err
				}})
			}
		}
	}
	return configs
}

// otherConfigs are the stream, codec, idle-memory and many-connection rows.
func (c Config) otherConfigs(ctx context.Context) []config {
	configs := []config{{nameStream, map[string]any{"stack": "sluice", "request_n": 256}, func() (bench.Metrics, error) {
		r, err := bench.SluiceStream(ctx, c.Duration, c.Size, 256)
		return bench.Metrics{"payloads_per_sec": r}, err
	}}}
	if c.RSGo != "" {
		configs = append(configs, config{nameStreamGo, map[string]any{"stack": "rsocket-go v0.8.16"}, func() (bench.Metrics, error) {
			m, err := bench.RSocketGo(ctx, c.RSGo, "stream", "block", 1, c.Duration, c.Size)
			return bench.Metrics{"payloads_per_sec": m["payloads"] / m["elapsed_s"]}, err
		}})
	}
	configs = append(configs, config{nameFrame, map[string]any{"stack": "sluice"}, func() (bench.Metrics, error) {
		e, ea, d, da := bench.FrameRates(min(c.Duration, time.Second), c.Size)
		return bench.Metrics{"encode_per_sec": e, "encode_allocs": ea, "decode_per_sec": d, "decode_allocs": da}, nil
	}})
	if c.IdleConns > 0 {
		configs = append(configs, config{nameIdle, map[string]any{"stack": "sluice", "conns": c.IdleConns}, func() (bench.Metrics, error) {
			b, err := bench.IdleConnBytes(ctx, c.IdleConns)
			return bench.Metrics{"bytes_per_conn": b}, err
		}})
	}
	if c.Conns > 0 {
		for _, api := range c.APIs {
			configs = append(configs, config{c.multiName(api), map[string]any{"stack": "sluice", "conns": c.Conns, "inflight": 128, "api": api}, func() (bench.Metrics, error) {
				return multiConnRun(ctx, c.Self, c.Conns, c.Duration, c.Size, api == "async")
			}})
		}
	}
	return configs
}

// ratios sets sluice / peer on each peer row, each rep paired with the
// same rep of sluice, like against like: rsocket-go's blocking client
// against sluice's blocking API, its async client against sluice's async
// API. gRPC bidi has one client, a goroutine per request in flight
// waiting for its answer (blocking), so it pairs with sluice's blocking
// API when that runs (before 2026-11-28 the async API's ratio overwrote
// it: 3.55× where blocking against blocking was 1.82×).
func (c Config) ratios(rs bench.Results) {
	ratio := func(sluice, peer, metric string) {
		s, p := rs.Row(sluice), rs.Row(peer)
		if s == nil || p == nil {
			return
		}
		for i, m := range p.Reps {
			m["sluice_ratio"] = s.Reps[i][metric] / m[metric]
		}
	}
	grpcPair := "async"
	if len(c.APIs) == 0 || slices.Contains(c.APIs, "blocking") {
		grpcPair = "blocking"
	}
	for _, n := range c.InFlights {
		ratio(rrName(sluiceName(grpcPair), n), rrName("gRPC bidi", n), "req_per_sec")
		for _, api := range c.APIs {
			ratio(rrName(sluiceName(api), n), rrName(rsgoName(api), n), "req_per_sec")
		}
	}
	ratio(nameStream, nameStreamGo, "payloads_per_sec")
}

func us(r *bench.Row, k string) string { return r.Stat(k).FormatUnit(1, " µs") }

func (c Config) printTables(stdout io.Writer, rs bench.Results, configs []config) {
	fmt.Fprintf(stdout, "\n%s; %d B payloads, one connection, closed loop, %s per run\n\n", benchkit.RepsLine(c.Report.Reps), c.Size, c.Duration)
	fmt.Fprintln(stdout, "| run | req/s | p50 | p99 | CPU per request | sluice ÷ this (req/s) |\n|---|---:|---:|---:|---:|---:|")
	x := func(r *bench.Row) string {
		if s := r.Stat("sluice_ratio"); s.N > 0 {
			return s.FormatUnit(2, "×")
		}
		return ""
	}
	for _, cf := range configs {
		r := rs.Row(cf.name)
		if _, ok := r.Reps[0]["req_per_sec"]; ok {
			fmt.Fprintf(stdout, "| %s | %s | %s | %s | %s | %s |\n", r.Name, r.Stat("req_per_sec").Format(0), us(r, "p50_us"), us(r, "p99_us"), us(r, "cpu_us_per_req"), x(r))
		}
	}
	fmt.Fprintln(stdout, "\n| run | payloads/s | sluice ÷ this |\n|---|---:|---:|")
	for _, name := range []string{nameStream, nameStreamGo} {
		if r := rs.Row(name); r != nil {
			fmt.Fprintf(stdout, "| %s | %s | %s |\n", r.Name, r.Stat("payloads_per_sec").Format(0), x(r))
		}
	}
}

func (c Config) notes(rs bench.Results) []string {
	var notes []string
	if r := rs.Row(nameFrame); r != nil {
		notes = append(notes, fmt.Sprintf("frame codec (%d B PAYLOAD, one goroutine): encode %s frames per CPU-second, %s allocs/frame; decode %s frames per CPU-second, %s allocs/frame",
			c.Size, r.Stat("encode_per_sec").Format(0), r.Stat("encode_allocs").Format(2), r.Stat("decode_per_sec").Format(0), r.Stat("decode_allocs").Format(2)))
	}
	if r := rs.Row(nameIdle); r != nil {
		notes = append(notes, fmt.Sprintf("idle connection: %s bytes of heap and stacks per connection, client and server end together (%d connections)",
			r.Stat("bytes_per_conn").Format(0), c.IdleConns))
	}
	for _, api := range c.APIs {
		if r := rs.Row(c.multiName(api)); r != nil {
			notes = append(notes, fmt.Sprintf("%d connections × 128 in flight to `sluice rsocket serve`, %s API: %s req/s, p99 %s, server peak RSS %s MB",
				c.Conns, api, r.Stat("req_per_sec").Format(0), us(r, "p99_us"), r.Stat("server_rss_mb").Format(1)))
		}
	}
	if c.RSGo == "" {
		notes = append(notes, "rsocket-go: skipped: build it with "+peerbuild.RSGoBenchBuildHint)
	}
	return notes
}

// multiConnRun starts `sluice rsocket serve` (bin) as a child,
// runs request-response over conns connections to it, and reports its
// peak RSS with the rate.
func multiConnRun(ctx context.Context, bin string, conns int, dur time.Duration, size int, async bool) (bench.Metrics, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "rsocket", "serve", "--listen", "tcp://127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				urlc <- u
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var url string
	select {
	case url = <-urlc:
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%s rsocket serve printed no listening line", bin)
	}
	s0, c0 := bench.ProcCPU(cmd.Process.Pid), bench.SelfCPU()
	r, err := bench.MultiConnRR(ctx, url, conns, 128, dur, size, async)
	if err != nil {
		return nil, err
	}
	// Both processes' CPU (the connections' setup is outside the window).
	if s1 := bench.ProcCPU(cmd.Process.Pid); s1 > s0 {
		r.CPU = s1 - s0 + bench.SelfCPU() - c0
	}
	rss, err := bench.RSSHighWater(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	m := r.Metrics()
	m["server_rss_mb"] = float64(rss) / 1e6
	return m, nil
}
