package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/bench/rr"
)

func init() {
	register("bench rr", "nine request-response protocols compared as in \"Request-Response Olympics\": burst (its harness), open and closed loop", runBenchRR)
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
		if err := os.WriteFile(*svgPath, []byte(rrSVG(rs)), 0o644); err != nil {
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
	// defaults, as the Olympics harness did.
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

// rrSVG draws two charts in plain SVG: p50/p99/p99.9 (medians, log scale)
// for every row, and throughput against requests in flight for the
// closed-loop rows, one line per protocol.
func rrSVG(rs bench.Results) string {
	var b strings.Builder
	const w, barH, left = 900, 14, 230
	rows := rs.Rows
	h1 := 60 + len(rows)*(3*barH+8)
	h2 := 380
	hasClosed := slices.ContainsFunc(rows, func(r *bench.Row) bool { return r.Params["mode"] == "closed" })
	if !hasClosed {
		h2 = -40 // no second chart
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h1+h2+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="20" font-size="15">Latency per protocol (median of reps; log scale, µs): p50, p99, p99.9</text>`+"\n")
	// Log axis from 10 µs to the largest p99.9.
	hi := 1000.0
	for _, r := range rows {
		hi = max(hi, r.Stat("p999_us").Median)
	}
	lo := 10.0
	x := func(v float64) float64 {
		v = min(max(v, lo), hi)
		return left + (w-left-30)*(log10(v)-log10(lo))/(log10(hi)-log10(lo))
	}
	for d := lo; d <= hi*1.0001; d *= 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="30" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" fill="#555">%s</text>`+"\n", x(d), x(d), h1-10, x(d)+2, h1, usLabel(d))
	}
	colors := []string{"#4c78a8", "#f58518", "#e45756"}
	for i, r := range rows {
		y := 40 + i*(3*barH+8)
		fmt.Fprintf(&b, `<text x="5" y="%d">%s</text>`+"\n", y+2*barH, esc(r.Name))
		for j, m := range []string{"p50_us", "p99_us", "p999_us"} {
			v := r.Stat(m).Median
			if v != v {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d" font-size="10">%.0f</text>`+"\n",
				left, y+j*barH, x(v)-left, barH-2, colors[j], x(v)+3, y+j*barH+barH-4, v)
		}
	}
	if !hasClosed {
		b.WriteString("</svg>\n")
		return b.String()
	}
	// Throughput against in flight.
	type pt struct{ n, rps float64 }
	lines := map[string][]pt{}
	var names []string
	maxRPS, maxN := 1.0, 1.0
	for _, r := range rows {
		if r.Params["mode"] != "closed" {
			continue
		}
		p := fmt.Sprint(r.Params["protocol"])
		if _, ok := lines[p]; !ok {
			names = append(names, p)
		}
		n := float64(r.Params["inflight"].(int))
		v := r.Stat("rps").Median
		lines[p] = append(lines[p], pt{n, v})
		maxRPS, maxN = max(maxRPS, v), max(maxN, n)
	}
	top := h1 + 40
	fmt.Fprintf(&b, `<text x="10" y="%d" font-size="15">Closed loop: requests/s (median) against requests in flight (log scale), one connection</text>`+"\n", top)
	px := func(n float64) float64 { return 80 + (w-300)*log10(n)/max(log10(maxN), 1) }
	py := func(v float64) float64 { return float64(top+h2-40) - float64(h2-80)*v/maxRPS }
	fmt.Fprintf(&b, `<line x1="80" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/><line x1="80" y1="%d" x2="80" y2="%.1f" stroke="#333"/>`+"\n", py(0), w-220, py(0), top+20, py(0))
	for k := 0; k <= 4; k++ {
		v := maxRPS * float64(k) / 4
		fmt.Fprintf(&b, `<text x="5" y="%.1f" fill="#555">%.0fk/s</text>`+"\n", py(v)+4, v/1000)
	}
	for n := 1.0; n <= maxN; n *= 4 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">%.0f</text>`+"\n", px(n)-4, py(0)+15, n)
	}
	palette := []string{"#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d"}
	for i, p := range names {
		pts := lines[p]
		slices.SortFunc(pts, func(a, b pt) int { return int(a.n - b.n) })
		var poly []string
		for _, q := range pts {
			poly = append(poly, fmt.Sprintf("%.1f,%.1f", px(q.n), py(q.rps)))
		}
		c := palette[i%len(palette)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(poly, " "))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", w-200, top+30+i*18, c, w-182, top+40+i*18, esc(p))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func usLabel(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.0f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func log10(v float64) float64 { return math.Log10(v) }
