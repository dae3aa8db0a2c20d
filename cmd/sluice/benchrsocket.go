package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
)

func init() {
	register("bench rsocket", "sluice RSocket vs gRPC bidi vs rsocket-go on one connection: request-response, request-stream, frame codec, idle memory", runBenchRSocket)
}

const rsgoBuildHint = "cd interop/rsocket-go && go build -o rsgo-bench ./cmd/rsgo-bench (then pass --rsocket-go interop/rsocket-go/rsgo-bench or put it on PATH)"

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
	ctx, stop := signalContext()
	defer stop()
	if *rsgo == "" {
		*rsgo = findRSGo()
	}
	if *rsgo == "" {
		fmt.Fprintf(stderr, "rsocket-go: skipped: build it with %s\n", rsgoBuildHint)
	}
	sz := int(size)

	type config struct {
		name   string
		params map[string]any
		run    func() (bench.Metrics, error)
	}
	rrName := func(who string, n int) string { return fmt.Sprintf("%s request-response, %d in flight", who, n) }
	// The blocking API keeps the historical row name; async rows say so.
	sluiceName := func(api string) string {
		if api == "async" {
			return "sluice (async API)"
		}
		return "sluice"
	}
	var configs []config
	for _, n := range inflights {
		for _, api := range apis {
			configs = append(configs, config{rrName(sluiceName(api), n), map[string]any{"stack": "sluice", "inflight": n, "api": api}, func() (bench.Metrics, error) {
				r, err := bench.SluiceRR(ctx, n, *dur, sz, api == "async")
				return r.Metrics(), err
			}})
		}
		if *grpcOn {
			configs = append(configs, config{rrName("gRPC bidi", n), map[string]any{"stack": "grpc-go bidi", "inflight": n}, func() (bench.Metrics, error) {
				r, err := bench.GRPCBidi(ctx, n, *dur, sz)
				return r.Metrics(), err
			}})
		}
		if *rsgo != "" {
			configs = append(configs, config{rrName("rsocket-go", n), map[string]any{"stack": "rsocket-go v0.8.16", "inflight": n}, func() (bench.Metrics, error) {
				m, err := bench.RSocketGo(ctx, *rsgo, "rr", n, *dur, sz)
				return bench.PeerRR(m).Metrics(), err
			}})
		}
	}
	const (
		nameStream   = "sluice request-stream"
		nameStreamGo = "rsocket-go request-stream"
		nameFrame    = "sluice frame codec, PAYLOAD"
		nameIdle     = "sluice idle connection"
	)
	configs = append(configs, config{nameStream, map[string]any{"stack": "sluice", "request_n": 256}, func() (bench.Metrics, error) {
		r, err := bench.SluiceStream(ctx, *dur, sz, 256)
		return bench.Metrics{"payloads_per_sec": r}, err
	}})
	if *rsgo != "" {
		configs = append(configs, config{nameStreamGo, map[string]any{"stack": "rsocket-go v0.8.16"}, func() (bench.Metrics, error) {
			m, err := bench.RSocketGo(ctx, *rsgo, "stream", 1, *dur, sz)
			return bench.Metrics{"payloads_per_sec": m["payloads"] / m["elapsed_s"]}, err
		}})
	}
	configs = append(configs, config{nameFrame, map[string]any{"stack": "sluice"}, func() (bench.Metrics, error) {
		e, ea, d, da := bench.FrameRates(min(*dur, time.Second), sz)
		return bench.Metrics{"encode_per_sec": e, "encode_allocs": ea, "decode_per_sec": d, "decode_allocs": da}, nil
	}})
	if *idle > 0 {
		configs = append(configs, config{nameIdle, map[string]any{"stack": "sluice", "conns": *idle}, func() (bench.Metrics, error) {
			b, err := bench.IdleConnBytes(ctx, *idle)
			return bench.Metrics{"bytes_per_conn": b}, err
		}})
	}
	multiName := func(api string) string {
		return fmt.Sprintf("%s request-response, %d connections × 128 in flight, server in its own process", sluiceName(api), *multi)
	}
	if *multi > 0 {
		for _, api := range apis {
			configs = append(configs, config{multiName(api), map[string]any{"stack": "sluice", "conns": *multi, "inflight": 128, "api": api}, func() (bench.Metrics, error) {
				return multiConnRun(ctx, *multi, *dur, sz, api == "async")
			}})
		}
	}

	var rs bench.Results
	for _, step := range bench.RepOrder(bf.reps, len(configs)) {
		c := configs[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s ...\n", step.Rep+1, bf.reps, c.name)
		m, err := c.run()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		rs.Add(c.name, c.params, m)
	}
	// sluice / peer, each rep paired with the same rep of the peer.
	ratio := func(sluice, peer, metric string) {
		s, p := rs.Row(sluice), rs.Row(peer)
		if s == nil || p == nil {
			return
		}
		for i, m := range p.Reps {
			m["sluice_ratio"] = s.Reps[i][metric] / m[metric]
		}
	}
	for _, n := range inflights {
		// With both APIs, the ratio is the async one's (the faster).
		for _, api := range apis {
			ratio(rrName(sluiceName(api), n), rrName("gRPC bidi", n), "req_per_sec")
			ratio(rrName(sluiceName(api), n), rrName("rsocket-go", n), "req_per_sec")
		}
	}
	ratio(nameStream, nameStreamGo, "payloads_per_sec")

	fmt.Fprintf(stdout, "\n%s; %d B payloads, one connection, closed loop, %s per run\n\n", repsLine(bf.reps), sz, *dur)
	fmt.Fprintln(stdout, "| run | req/s | p50 | p99 | CPU per request | sluice ÷ this (req/s) |\n|---|---:|---:|---:|---:|---:|")
	us := func(r *bench.Row, k string) string { return r.Stat(k).FormatUnit(1, " µs") }
	x := func(r *bench.Row) string {
		if s := r.Stat("sluice_ratio"); s.N > 0 {
			return s.FormatUnit(2, "×")
		}
		return ""
	}
	for _, c := range configs {
		r := rs.Row(c.name)
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
	var notes []string
	if r := rs.Row(nameFrame); r != nil {
		notes = append(notes, fmt.Sprintf("frame codec (%d B PAYLOAD, one goroutine): encode %s frames per CPU-second, %s allocs/frame; decode %s frames per CPU-second, %s allocs/frame",
			sz, r.Stat("encode_per_sec").Format(0), r.Stat("encode_allocs").Format(2), r.Stat("decode_per_sec").Format(0), r.Stat("decode_allocs").Format(2)))
	}
	if r := rs.Row(nameIdle); r != nil {
		notes = append(notes, fmt.Sprintf("idle connection: %s bytes of heap and stacks per connection, client and server end together (%d connections)",
			r.Stat("bytes_per_conn").Format(0), *idle))
	}
	for _, api := range apis {
		if r := rs.Row(multiName(api)); r != nil {
			notes = append(notes, fmt.Sprintf("%d connections × 128 in flight to `sluice rsocket serve`, %s API: %s req/s, p99 %s, server peak RSS %s MB",
				*multi, api, r.Stat("req_per_sec").Format(0), us(r, "p99_us"), r.Stat("server_rss_mb").Format(1)))
		}
	}
	if *rsgo == "" {
		notes = append(notes, "rsocket-go: skipped: build it with "+rsgoBuildHint)
	}
	fmt.Fprintln(stdout)
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	return bf.write("bench rsocket", args, map[string]any{"payload_bytes": sz, "duration_s": dur.Seconds()}, rs, notes)
}

// findRSGo looks for the rsgo-bench peer on PATH and in interop/rsocket-go.
func findRSGo() string {
	if p, err := exec.LookPath("rsgo-bench"); err == nil {
		return p
	}
	if p, err := findUp(filepath.Join("interop", "rsocket-go", "rsgo-bench")); err == nil {
		return p
	}
	return ""
}

// multiConnRun starts `sluice rsocket serve` (this binary) as a child,
// runs request-response over conns connections to it, and reports its
// peak RSS with the rate.
func multiConnRun(ctx context.Context, conns int, dur time.Duration, size int, async bool) (bench.Metrics, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
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
