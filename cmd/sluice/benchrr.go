package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/bench/rr"
	"github.com/sluicehq/sluice/internal/lab/chart"
)

func init() {
	register("bench rr", "request-response olympics: nine protocols, burst (the seed's harness), open and closed loop", runBenchRR)
	register("bench rr-server", "(internal) the echo server of one protocol for `bench rr --split`", runBenchRRServer)
}

type rrConfig struct {
	proto    rr.Protocol
	mode     string
	inflight int
}

func (c rrConfig) name() string {
	switch c.mode {
	case "closed":
		return fmt.Sprintf("%s closed %d", c.proto.Name, c.inflight)
	}
	return c.proto.Name + " " + c.mode
}

func runBenchRR(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench rr", "[--protocols LIST] [--mode burst|open|closed] [--rate N] [--inflight LIST] [--duration D] [--reps N] [--payload SIZE] [--split] [--json FILE] [--svg FILE]", stderr)
	protos := fs.String("protocols", rr.ProtocolNames(), "comma-separated contestants")
	modes := fs.String("mode", "open", "burst, open or closed (comma-separated for several)")
	rate := fs.Float64("rate", 100, "open loop: intended requests per second")
	inflightList := fs.String("inflight", "1,16,128,1024", "closed loop: requests in flight on one connection (comma-separated)")
	dur := fs.Duration("duration", 3*time.Second, "open and closed loop: measured time of each rep")
	payload := byteSize(64)
	fs.Var(&payload, "payload", "request (and reply) payload size")
	split := fs.Bool("split", false, "run each server in its own process (`sluice bench rr-server`) and report its CPU separately")
	burstSeconds := fs.Int("burst-seconds", 6, "burst: spread of the seed's random whole-second sleeps; 100 calls per second of spread (the seed: 60, i.e. 6,000 calls)")
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
	var configs []rrConfig
	var skipped []string
	ctx, stop := signalContext()
	defer stop()
	peerPath := ""
	for _, name := range strings.Split(*protos, ",") {
		p, ok := rr.Lookup(strings.TrimSpace(name))
		if !ok {
			return &exitError{code: 2, msg: fmt.Sprintf("--protocols: unknown %q (known: %s)", name, rr.ProtocolNames())}
		}
		if p.Serve == nil {
			path, err := findRRPeer(ctx, *rrpeer, stderr)
			if err != nil {
				msg := fmt.Sprintf("%s skipped: %v", p.Name, err)
				fmt.Fprintln(stdout, msg)
				skipped = append(skipped, msg)
				continue
			}
			peerPath = path
		}
		for _, m := range strings.Split(*modes, ",") {
			switch m {
			case "burst", "open":
				configs = append(configs, rrConfig{proto: p, mode: m})
			case "closed":
				for _, n := range inflights {
					configs = append(configs, rrConfig{proto: p, mode: m, inflight: n})
				}
			default:
				return &exitError{code: 2, msg: fmt.Sprintf("--mode: unknown %q (burst, open, closed)", m)}
			}
		}
	}
	data := make([]byte, int(payload))
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	self, _ := os.Executable()
	var rs bench.Results
	for _, step := range bench.RepOrder(bf.reps, len(configs)) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c := configs[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s ...\n", step.Rep+1, bf.reps, c.name())
		m, err := runRRStep(ctx, c, rrStep{data: data, rate: *rate, dur: *dur, split: *split, self: self, peer: peerPath,
			burstSeconds: *burstSeconds, seed: uint64(step.Rep + 1)})
		if err != nil {
			return fmt.Errorf("%s: %w", c.name(), err)
		}
		params := map[string]any{"protocol": c.proto.Name, "mode": c.mode, "payload": int(payload)}
		switch c.mode {
		case "closed":
			params["inflight"] = c.inflight
		case "open":
			params["rate"] = *rate
		case "burst":
			params["calls"], params["burst_seconds"] = 100**burstSeconds, *burstSeconds
		}
		rs.Add(c.name(), params, m)
	}
	printRRTable(stdout, rs, *split)
	fmt.Fprintln(stdout, repsLine(bf.reps))
	notes := skipped
	if *svgPath != "" {
		if err := os.WriteFile(*svgPath, []byte(chart.RR(rs)), 0o644); err != nil {
			return err
		}
	}
	return bf.write("bench rr", args, map[string]any{"split": *split, "payload": int(payload), "duration_s": dur.Seconds()}, rs, notes)
}

type rrStep struct {
	data         []byte
	rate         float64
	dur          time.Duration
	split        bool
	self, peer   string
	burstSeconds int
	seed         uint64
}

// runRRStep runs one rep of one configuration: a fresh server and client,
// a short warm-up, then the measured run between two CPU readings.
func runRRStep(ctx context.Context, c rrConfig, s rrStep) (bench.Metrics, error) {
	var addr string
	var serverCPU func() (time.Duration, error)
	if s.split || c.proto.Serve == nil {
		cmd := exec.CommandContext(ctx, s.self, "bench", "rr-server", "--protocol", c.proto.Name)
		if c.proto.Serve == nil {
			cmd = exec.CommandContext(ctx, s.peer, "serve")
		}
		cmd.Stderr = os.Stderr
		r, err := rr.StartRemote(cmd, 30*time.Second)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		addr = r.Addr
		serverCPU = func() (time.Duration, error) { return r.CPU(ctx) }
	} else {
		a, stop, err := c.proto.Serve(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
		addr = a
	}
	if c.proto.Dial == nil {
		return runPeerClient(ctx, c, s, addr, serverCPU)
	}
	// Pooled clients get one connection per request in flight, as their
	// users would configure them; in burst mode they keep the library
	// defaults, as the seed did.
	conns := 0
	switch c.mode {
	case "closed":
		conns = c.inflight
	case "open":
		conns = 64
	}
	cl, err := c.proto.Dial(ctx, addr, rr.DialOptions{Conns: conns})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	call := func(ctx context.Context) error {
		got, err := cl.Call(ctx, s.data)
		if err == nil && len(got) != len(s.data) {
			err = fmt.Errorf("reply of %d bytes to %d", len(got), len(s.data))
		}
		return err
	}
	// Warm-up: connections, pools and code paths, not measured.
	if c.mode != "burst" {
		w := rr.Closed(ctx, rr.NewRealClock(), max(c.inflight, 1), 300*time.Millisecond, call)
		if w.Latency.Count == 0 {
			return nil, errors.New("no reply during warm-up")
		}
	} else if err := call(ctx); err != nil {
		return nil, err
	}
	var srv0 time.Duration
	if serverCPU != nil {
		if srv0, err = serverCPU(); err != nil {
			return nil, err
		}
	}
	cpu0 := rr.ProcessCPU()
	clk := rr.NewRealClock()
	var res rr.Result
	switch c.mode {
	case "open":
		res = rr.Open(ctx, clk, s.rate, s.dur, 10_000, call)
	case "closed":
		res = rr.Closed(ctx, clk, c.inflight, s.dur, call)
	case "burst":
		res = rr.Burst(ctx, clk, time.Sleep, rand.New(rand.NewPCG(s.seed, 3)), 100*s.burstSeconds, s.burstSeconds, call)
	}
	// The open-loop pacer's spinning is the generator's cost, not the
	// protocol's.
	clientCPU := max(rr.ProcessCPU()-cpu0-clk.Spun(), 0)
	n := float64(res.Latency.Count)
	if n == 0 {
		return nil, fmt.Errorf("no request succeeded (%d errors)", res.Errors)
	}
	l := res.Latency
	m := bench.Metrics{"rps": res.RPS(), "p50_us": l.P50, "p90_us": l.P90, "p99_us": l.P99, "p999_us": l.P999,
		"max_us": l.Max, "errors": float64(res.Errors), "client_cpu_us_per_req": float64(clientCPU.Microseconds()) / n}
	m["cpu_us_per_req"] = m["client_cpu_us_per_req"]
	if serverCPU != nil {
		srv1, err := serverCPU()
		if err != nil {
			return nil, err
		}
		m["server_cpu_us_per_req"] = float64((srv1 - srv0).Microseconds()) / n
		m["cpu_us_per_req"] += m["server_cpu_us_per_req"]
	}
	return m, nil
}

// runPeerClient runs one rep with the peer's own client (rsocket-go): the
// server is warmed up by sluice's RSocket client first, then the peer
// drives the measured load and prints its result line.
func runPeerClient(ctx context.Context, c rrConfig, s rrStep, addr string, serverCPU func() (time.Duration, error)) (bench.Metrics, error) {
	warm, err := rr.Lookup("rsocket-go-server")
	if !err {
		return nil, errors.New("no rsocket-go-server protocol")
	}
	if cl, err := warm.Dial(ctx, addr, rr.DialOptions{}); err == nil {
		rr.Closed(ctx, rr.NewRealClock(), max(c.inflight, 1), 300*time.Millisecond, func(ctx context.Context) error {
			_, err := cl.Call(ctx, s.data)
			return err
		})
		cl.Close()
	}
	srv0, err2 := serverCPU()
	if err2 != nil {
		return nil, err2
	}
	out, err2 := exec.CommandContext(ctx, s.peer, "client", "--addr", addr, "--mode", c.mode, "--inflight", strconv.Itoa(max(c.inflight, 1)),
		"--rate", strconv.FormatFloat(s.rate, 'f', -1, 64), "--duration", s.dur.String(), "--payload", strconv.Itoa(len(s.data)),
		"--burst-seconds", strconv.Itoa(s.burstSeconds), "--seed", strconv.FormatUint(s.seed, 10), "--warmup", "0").Output()
	if err2 != nil {
		return nil, fmt.Errorf("rrpeer client: %w", err2)
	}
	srv1, err2 := serverCPU()
	if err2 != nil {
		return nil, err2
	}
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndex(line, "result "); i >= 0 {
		line = line[i+len("result "):]
	} else {
		return nil, fmt.Errorf("rrpeer client printed %q", out)
	}
	v := map[string]float64{}
	for _, f := range strings.Fields(line) {
		k, val, ok := strings.Cut(f, "=")
		x, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("rrpeer client: bad field %q", f)
		}
		v[k] = x
	}
	n := v["count"]
	if n == 0 || v["elapsed_us"] == 0 {
		return nil, fmt.Errorf("rrpeer client: no request succeeded (%v errors)", v["errors"])
	}
	m := bench.Metrics{"rps": n / (v["elapsed_us"] / 1e6), "p50_us": v["p50_us"], "p90_us": v["p90_us"], "p99_us": v["p99_us"],
		"p999_us": v["p999_us"], "max_us": v["max_us"], "errors": v["errors"], "client_cpu_us_per_req": v["cpu_us"] / n,
		"server_cpu_us_per_req": float64((srv1 - srv0).Microseconds()) / n}
	m["cpu_us_per_req"] = m["client_cpu_us_per_req"] + m["server_cpu_us_per_req"]
	return m, nil
}

func printRRTable(w io.Writer, rs bench.Results, split bool) {
	cpuHead := "CPU µs/req (client+server, one process)"
	if split {
		cpuHead = "CPU µs/req total | client | server"
	}
	fmt.Fprintf(w, "| protocol | mode | in flight / rate | req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | %s |\n", cpuHead)
	sep := "|---|---|---|---|---|---|---|---|---|---|"
	if split {
		sep += "---|---|"
	}
	fmt.Fprintln(w, sep)
	for _, r := range rs.Rows {
		load := ""
		switch r.Params["mode"] {
		case "closed":
			load = fmt.Sprint(r.Params["inflight"])
		case "open":
			load = fmt.Sprintf("%v/s", r.Params["rate"])
		case "burst":
			load = fmt.Sprintf("%v calls over %v s", r.Params["calls"], r.Params["burst_seconds"])
		}
		cpu := r.Stat("cpu_us_per_req").Format(1)
		if split {
			cpu += " | " + r.Stat("client_cpu_us_per_req").Format(1) + " | " + r.Stat("server_cpu_us_per_req").Format(1)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Params["protocol"], r.Params["mode"], load,
			r.Stat("rps").Format(0), r.Stat("p50_us").Format(0), r.Stat("p90_us").Format(0), r.Stat("p99_us").Format(0),
			r.Stat("p999_us").Format(0), r.Stat("max_us").Format(0), cpu)
	}
}

// findRRPeer returns the rsocket-go echo server: path if given, else a
// build of interop/rsocket-go/cmd/rrpeer found above the working directory
// (cached in the user cache directory).
func findRRPeer(ctx context.Context, path string, stderr io.Writer) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", err
		}
		return path, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "interop", "rsocket-go", "cmd", "rrpeer")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("interop/rsocket-go/cmd/rrpeer not found above the working directory (or pass --rrpeer)")
		}
		dir = parent
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", errors.New("building rrpeer needs the go command")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "sluice", "rrpeer")
	fmt.Fprintf(stderr, "building %s ...\n", out)
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", out, "./cmd/rrpeer")
	cmd.Dir = filepath.Join(dir, "interop", "rsocket-go")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building rrpeer: %v: %s", err, strings.TrimSpace(string(b)))
	}
	return out, nil
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
