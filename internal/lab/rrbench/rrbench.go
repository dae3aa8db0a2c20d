// Package rrbench is `sluice bench rr`, the request-response olympics:
// request-response protocols' echo servers and clients beside raw TCP, the
// physical limit, in burst (the harness of
// "Request-Response Olympics"), open-loop and closed-loop load, optionally each server in its
// own process so that its CPU is reported apart.
package rrbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/bench/rr"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/lab/chart"
	"github.com/sluicehq/sluice/internal/testkit/peerbuild"
)

// Config is one `sluice bench rr`.
type Config struct {
	Protocols    []string // names known to rr.Lookup
	Modes        []string // burst, open, closed
	Rate         float64  // open loop: intended requests per second
	InFlights    []int    // closed loop: requests in flight on one connection
	Duration     time.Duration
	Payload      int
	Split        bool   // each server in its own process (Self bench rr-server)
	BurstSeconds int    // burst: spread of the whole-second sleeps before each call
	SVGPath      string // chart ("": none)
	RRPeer       string // rsocket-go echo server ("": build interop/rsocket-go/cmd/rrpeer)
	Self         string // this binary, for --split
	Report       benchkit.Report
}

// Validate checks the protocol and mode names, in the flags' words.
func (c Config) Validate() error {
	for _, name := range c.Protocols {
		if _, ok := rr.Lookup(strings.TrimSpace(name)); !ok {
			return fmt.Errorf("--protocols: unknown %q (known: %s)", name, rr.ProtocolNames())
		}
	}
	for _, m := range c.Modes {
		if m != "burst" && m != "open" && m != "closed" {
			return fmt.Errorf("--mode: unknown %q (burst, open, closed)", m)
		}
	}
	return nil
}

// config is one measured configuration: a protocol in a mode.
type config struct {
	proto    rr.Protocol
	mode     string
	inflight int
}

func (c config) name() string {
	switch c.mode {
	case "closed":
		return fmt.Sprintf("%s closed %d", c.proto.Name, c.inflight)
	}
	return c.proto.Name + " " + c.mode
}

// plan lists the configurations; a protocol whose peer cannot be had is
// skipped, said on stdout and in the returned notes. peers maps each peer
// command needed to its binary.
func (c Config) plan(ctx context.Context, stdout, stderr io.Writer) (configs []config, skipped []string, peers map[string]string) {
	peers = map[string]string{}
	peerErrs := map[string]error{} // a peer that failed to build once is not built again
	for _, name := range c.Protocols {
		p, _ := rr.Lookup(strings.TrimSpace(name))
		if err := rr.Unavailable(p.Name); err != nil {
			msg := fmt.Sprintf("%s: %v", p.Name, err)
			fmt.Fprintln(stdout, msg)
			skipped = append(skipped, msg)
			continue
		}
		if peer, ok := rr.Peers[p.Name]; ok && peers[peer.Cmd] == "" {
			if peerErrs[peer.Cmd] == nil {
				peers[peer.Cmd], peerErrs[peer.Cmd] = c.buildPeer(ctx, peer, stderr)
			}
			if err := peerErrs[peer.Cmd]; err != nil {
				msg := fmt.Sprintf("%s skipped: %v", p.Name, err)
				fmt.Fprintln(stdout, msg)
				skipped = append(skipped, msg)
				continue
			}
		}
		for _, m := range c.Modes {
			if p.Name == "rsocket-go-async" && m != "closed" {
				continue // its async client is a closed loop only
			}
			if m != "closed" {
				configs = append(configs, config{proto: p, mode: m})
				continue
			}
			for _, n := range c.InFlights {
				configs = append(configs, config{proto: p, mode: m, inflight: n})
			}
		}
	}
	return configs, skipped, peers
}

// buildPeer returns peer's binary: --rrpeer's for rsocket-go, else a
// fresh build of its module.
func (c Config) buildPeer(ctx context.Context, peer rr.Peer, progress io.Writer) (string, error) {
	if peer.Cmd == "rrpeer" {
		return peerbuild.RRPeer(ctx, c.RRPeer, progress)
	}
	return peerbuild.Build(ctx, peer.Module, peer.Cmd, progress)
}

// Run measures every configuration, prints the table, and writes the
// chart and report asked for; Validate first.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	configs, skipped, peers := c.plan(ctx, stdout, stderr)
	data := make([]byte, c.Payload)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	var rs bench.Results
	for _, st := range bench.RepOrder(c.Report.Reps, len(configs)) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cf := configs[st.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s ...\n", st.Rep+1, c.Report.Reps, cf.name())
		m, err := runStep(ctx, cf, step{data: data, rate: c.Rate, dur: c.Duration, split: c.Split, self: c.Self, peers: peers,
			burstSeconds: c.BurstSeconds, seed: uint64(st.Rep + 1)})
		if err != nil {
			return fmt.Errorf("%s: %w", cf.name(), err)
		}
		rs.Add(cf.name(), c.params(cf), m)
	}
	ofTCP(rs, configs)
	PrintTable(stdout, rs.Rows, c.Split, true)
	fmt.Fprintln(stdout, benchkit.RepsLine(c.Report.Reps))
	if c.SVGPath != "" {
		if err := os.WriteFile(c.SVGPath, []byte(chart.RR(rs)), 0o644); err != nil {
			return err
		}
	}
	return c.Report.Write(map[string]any{"split": c.Split, "payload": c.Payload, "duration_s": c.Duration.Seconds()}, rs, skipped)
}

func (c Config) params(cf config) map[string]any {
	params := map[string]any{"protocol": cf.proto.Name, "mode": cf.mode, "payload": c.Payload}
	switch cf.mode {
	case "closed":
		params["inflight"] = cf.inflight
	case "open":
		params["rate"] = c.Rate
	case "burst":
		params["calls"], params["burst_seconds"] = 100*c.BurstSeconds, c.BurstSeconds
	}
	return params
}

type step struct {
	data         []byte
	rate         float64
	dur          time.Duration
	split        bool
	self         string
	peers        map[string]string // peer command → binary (Config.plan)
	burstSeconds int
	seed         uint64
}

// runStep runs one rep of one configuration: a fresh server and client,
// a short warm-up, then the measured run between two CPU readings.
func runStep(ctx context.Context, c config, s step) (bench.Metrics, error) {
	addr, serverCPU, stop, err := startServer(ctx, c, s)
	if err != nil {
		return nil, err
	}
	defer stop()
	return measure(ctx, c, s, addr, serverCPU)
}

// startServer starts c's echo server: in this process, or as a child
// (--split, or a peer's own server) whose CPU serverCPU reads.
func startServer(ctx context.Context, c config, s step) (addr string, serverCPU func() (time.Duration, error), stop func(), err error) {
	// redis-server is its own process already: its CPU is read from /proc.
	if (!s.split || rr.OwnProcess(c.proto.Name)) && c.proto.Serve != nil {
		addr, stop, err := c.proto.Serve(ctx)
		if pid := rr.ServerPID(addr); err == nil && pid != 0 {
			return addr, func() (time.Duration, error) { return bench.ProcCPU(pid), nil }, stop, nil
		}
		return addr, nil, stop, err
	}
	cmd := exec.CommandContext(ctx, s.self, "bench", "rr-server", "--protocol", c.proto.Name)
	if c.proto.Serve == nil {
		cmd = exec.CommandContext(ctx, s.peers[rr.Peers[c.proto.Name].Cmd], "serve")
	}
	cmd.Stderr = os.Stderr
	r, err := rr.StartRemote(cmd, 30*time.Second)
	if err != nil {
		return "", nil, nil, err
	}
	return r.Addr, func() (time.Duration, error) { return r.CPU(ctx) }, func() { r.Close() }, nil
}

// poolConns is the pool size of pooled clients (http1, go-redis): one
// connection per request in flight, as their users would configure them;
// in burst mode (0) they keep the library defaults, as the Olympics
// harness did.
func (c config) poolConns() int {
	switch c.mode {
	case "closed":
		return c.inflight
	case "open":
		return 64
	}
	return 0
}

// warmup is every client's unmeasured closed loop before a rep (burst:
// one call instead), the peers' own clients included.
const warmup = 300 * time.Millisecond

// measure warms the server up, then runs the measured load between two
// CPU readings.
func measure(ctx context.Context, c config, s step, addr string, serverCPU func() (time.Duration, error)) (bench.Metrics, error) {
	if c.proto.Dial == nil {
		return runPeerClient(ctx, c, s, addr, serverCPU)
	}
	cl, err := c.proto.Dial(ctx, addr, rr.DialOptions{Conns: c.poolConns()})
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
		w := rr.Closed(ctx, rr.NewRealClock(), max(c.inflight, 1), warmup, call)
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

// runPeerClient runs one rep with the peer's own client (rsocket-go,
// go-redis, rueidis): the peer warms up its own connection (the same
// 300 ms closed loop as every other client here) and drives the measured
// load, and prints its result line.
func runPeerClient(ctx context.Context, c config, s step, addr string, serverCPU func() (time.Duration, error)) (bench.Metrics, error) {
	peer := rr.Peers[c.proto.Name]
	warm := warmup
	if c.mode == "burst" {
		warm = time.Millisecond // the others make one call
	}
	srv0, err2 := serverCPU()
	if err2 != nil {
		return nil, err2
	}
	args := []string{"client", "--addr", addr, "--mode", c.mode, "--inflight", strconv.Itoa(max(c.inflight, 1)),
		"--rate", strconv.FormatFloat(s.rate, 'f', -1, 64), "--duration", s.dur.String(), "--payload", strconv.Itoa(len(s.data)),
		"--burst-seconds", strconv.Itoa(s.burstSeconds), "--seed", strconv.FormatUint(s.seed, 10), "--warmup", warm.String()}
	args = append(args, peer.Client...)
	if peer.Pooled {
		args = append(args, "--conns", strconv.Itoa(c.poolConns()))
	}
	out, err2 := exec.CommandContext(ctx, s.peers[peer.Cmd], args...).Output()
	if ee := (*exec.ExitError)(nil); errors.As(err2, &ee) {
		return nil, fmt.Errorf("%s client: %w: %s", peer.Cmd, err2, strings.TrimSpace(string(ee.Stderr)))
	} else if err2 != nil {
		return nil, fmt.Errorf("%s client: %w", peer.Cmd, err2)
	}
	srv1, err2 := serverCPU()
	if err2 != nil {
		return nil, err2
	}
	line := strings.TrimSpace(string(out))
	if i := strings.LastIndex(line, "result "); i >= 0 {
		line = line[i+len("result "):]
	} else {
		return nil, fmt.Errorf("%s client printed %q", peer.Cmd, out)
	}
	v := map[string]float64{}
	for _, f := range strings.Fields(line) {
		k, val, ok := strings.Cut(f, "=")
		x, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s client: bad field %q", peer.Cmd, f)
		}
		v[k] = x
	}
	n := v["count"]
	if n == 0 || v["elapsed_us"] == 0 {
		return nil, fmt.Errorf("%s client: no request succeeded (%v errors)", peer.Cmd, v["errors"])
	}
	m := bench.Metrics{"rps": n / (v["elapsed_us"] / 1e6), "p50_us": v["p50_us"], "p90_us": v["p90_us"], "p99_us": v["p99_us"],
		"p999_us": v["p999_us"], "max_us": v["max_us"], "errors": v["errors"], "client_cpu_us_per_req": v["cpu_us"] / n,
		"server_cpu_us_per_req": float64((srv1 - srv0).Microseconds()) / n}
	m["cpu_us_per_req"] = m["client_cpu_us_per_req"] + m["server_cpu_us_per_req"]
	return m, nil
}

// ofTCP sets every row's fraction of the physical limit, the coalescing
// raw TCP echo in the same mode and load, each rep paired with the same
// rep of tcp: closed loop "rps_of_tcp" (this req/s ÷ tcp's), open loop
// and burst "p50_of_tcp" (this p50 ÷ tcp's, so 1.3 is 30 % slower). Rows
// stay without it when tcp was not run.
func ofTCP(rs bench.Results, configs []config) {
	tcp, ok := rr.Lookup("tcp")
	if !ok {
		return
	}
	for _, cf := range configs {
		r := rs.Row(cf.name())
		lim := rs.Row(config{proto: tcp, mode: cf.mode, inflight: cf.inflight}.name())
		if r == nil || lim == nil {
			continue
		}
		for i, m := range r.Reps {
			if i >= len(lim.Reps) {
				break
			}
			l := lim.Reps[i]
			if cf.mode == "closed" && l["rps"] > 0 {
				m["rps_of_tcp"] = m["rps"] / l["rps"]
			} else if cf.mode != "closed" && l["p50_us"] > 0 {
				m["p50_of_tcp"] = m["p50_us"] / l["p50_us"]
			}
		}
	}
}

// PrintTable prints the table of rows (a run's, or a committed JSON's):
// with split the client's and server's CPU apart, with vsTCP the column
// of each row against the tcp limit's (rps_of_tcp, p50_of_tcp). The docs
// generate their tables with it (internal/docs TestBenchTables).
func PrintTable(w io.Writer, rows []*bench.Row, split, vsTCP bool) {
	cpuHead := "CPU µs/req (client+server, one process)"
	if split {
		cpuHead = "CPU µs/req total | client | server"
	}
	vsHead, sep := "", "|---|---|---|---|---|---|---|---|---|---|"
	if vsTCP {
		vsHead, sep = " vs tcp |", sep+"---|"
	}
	if split {
		sep += "---|---|"
	}
	fmt.Fprintf(w, "| protocol | mode | in flight / rate | req/s | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs |%s %s |\n%s\n", vsHead, cpuHead, sep)
	for _, r := range rows {
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
		vs := ""
		if vsTCP {
			// Closed loop: the share of tcp's req/s; open and burst: p50
			// as a multiple of tcp's.
			vs = "  |" // an empty cell, as the table always printed it
			if st := r.Stat("rps_of_tcp"); st.N > 0 {
				vs = " " + st.FormatUnit(2, " of req/s") + " |"
			} else if st := r.Stat("p50_of_tcp"); st.N > 0 {
				vs = " " + st.FormatUnit(2, "× p50") + " |"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |%s %s |\n", r.Params["protocol"], r.Params["mode"], load,
			r.Stat("rps").Format(0), r.Stat("p50_us").Format(0), r.Stat("p90_us").Format(0), r.Stat("p99_us").Format(0),
			r.Stat("p999_us").Format(0), r.Stat("max_us").Format(0), vs, cpu)
	}
}
