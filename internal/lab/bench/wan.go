package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/metricsgen"
	"github.com/sluicehq/sluice/internal/lab/netem"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
)

// Scenario is a link to emulate between the agents and the sink.
type Scenario struct {
	Name  string
	Rate  int64         // bottleneck, bytes/s per direction; 0: no emulator in the path
	RTT   time.Duration // added round-trip time
	Bytes int64         // uncompressed bytes each mode sends (unless WANConfig.Duration)
}

// Scenarios are the links of "Asynchronous Messaging Over gRPC" (pl-rants,
// 2020): its WAN ("seed", the name the bench has always used) and its
// overloaded site ("thin"), and loopback.
var Scenarios = []Scenario{
	{Name: "seed", Rate: 1e9 / 8, RTT: 150 * time.Millisecond, Bytes: 384 << 20},
	{Name: "thin", Rate: 40e6 / 8, RTT: 40 * time.Millisecond, Bytes: 128 << 20},
	{Name: "lan", Bytes: 192 << 20},
}

// Mode is how the agents send.
type Mode struct {
	Name        string
	Conns       int // agents, each with its own TCP connection
	Window      int // fixed messages in flight per connection; 0: auto
	Compression codec.Kind
}

// Modes are the four compared in the table of "Asynchronous Messaging Over
// gRPC", plus dictionaries.
func Modes(syncConns, window int) []Mode {
	return []Mode{
		{Name: "sync", Conns: syncConns, Window: 1, Compression: codec.Plain},
		{Name: "async", Conns: 1, Window: window, Compression: codec.Plain},
		{Name: "async+zstd", Conns: 1, Window: window, Compression: codec.Zstd},
		{Name: "async+zstd+dict", Conns: 1, Window: window, Compression: codec.ZstdDict},
	}
}

// WANConfig configures WANBench.
type WANConfig struct {
	Bin      string        // the sluice binary: runs the sink and the link as child processes
	Dir      string        // temporary directory if empty
	Duration time.Duration // > 0: each run lasts this long instead of sending Scenario.Bytes
	// MaxBytes bounds a Duration run: feeding stops once this many
	// uncompressed record bytes were fed, and the run ends when they are
	// acknowledged, if that comes before Duration. 0 means
	// DefaultMaxBytes. The agents' spool quota is sized to it, so a link
	// slower than the feeders never fills the disk.
	MaxBytes int64
	Seed     int64
	Progress io.Writer
	Logger   *slog.Logger
	// SinkCPUProfile, when set, is the file the run's sink child writes a
	// CPU profile of its whole life to (through SinkCPUProfileEnv): the
	// sink is a process of its own, which the bench's own profile does
	// not see.
	SinkCPUProfile string
	// CompressionLevel is the zstd effort of the agents' compressed modes
	// (agent.Config.CompressionLevel; the zero value is the default).
	CompressionLevel codec.Level
}

// SinkCPUProfileEnv is the environment variable that makes a sluice
// process write a CPU profile of itself to the file it names (cmd/sluice
// reads it); RunWAN sets it for the sink child of WANConfig.SinkCPUProfile.
const SinkCPUProfileEnv = "SLUICE_CPUPROFILE"

// DefaultMaxBytes is WANConfig.MaxBytes when it is 0.
const DefaultMaxBytes = 1 << 30

// SpoolQuota is the spool quota of each agent of a run that feeds at most
// fed uncompressed bytes: room for all of them as spooled (the spool holds
// messages compressed or not, plus framing) and a margin, so the quota is
// never what stops a run.
func SpoolQuota(fed int64) int64 { return fed + fed/8 + 64<<20 }

// WANResult is one run: one mode over one scenario.
type WANResult struct {
	Scenario string        `json:"scenario"`
	Mode     string        `json:"mode"`
	Conns    int           `json:"connections"`
	Window   string        `json:"window"`
	RateBits int64         `json:"link_bits_per_sec"`
	RTT      time.Duration `json:"rtt_ns"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	// RawBytes are uncompressed message bytes acknowledged; PayloadBytes
	// the same messages as sent (compressed); LinkBytes what crossed the
	// emulated link towards the sink, gRPC and TCP payload framing
	// included (0 without an emulator).
	RawBytes     int64         `json:"raw_bytes"`
	PayloadBytes int64         `json:"payload_bytes"`
	LinkBytes    int64         `json:"link_bytes"`
	Messages     int64         `json:"messages"`
	AgentCPU     time.Duration `json:"agent_cpu_ns"`
	SinkCPU      time.Duration `json:"sink_cpu_ns"`
	LinkCPU      time.Duration `json:"link_cpu_ns"`
	Resent       uint64        `json:"resent"`
	Rep          int           `json:"rep"` // 0-based repetition (--reps)
}

// GoodputMBps is uncompressed MB/s delivered and durably stored.
func (r WANResult) GoodputMBps() float64 { return float64(r.RawBytes) / r.Elapsed.Seconds() / 1e6 }

// WireMBps is what crossed the link per second (payload without an
// emulator).
func (r WANResult) WireMBps() float64 {
	b := r.LinkBytes
	if b == 0 {
		b = r.PayloadBytes
	}
	return float64(b) / r.Elapsed.Seconds() / 1e6
}

// Utilization is the fraction of the link's rate used, 0 when unshaped.
func (r WANResult) Utilization() float64 {
	if r.RateBits == 0 {
		return 0
	}
	return float64(r.LinkBytes) * 8 / r.Elapsed.Seconds() / float64(r.RateBits)
}

// Compression is uncompressed over compressed bytes.
func (r WANResult) Compression() float64 {
	if r.PayloadBytes == 0 {
		return 1
	}
	return float64(r.RawBytes) / float64(r.PayloadBytes)
}

// Dataset is the metrics every mode sends: messages of records, in the
// size distribution of "Asynchronous Messaging Over gRPC", generated once.
type Dataset struct {
	Msgs  [][][]byte
	Raw   int64
	Dict  codec.Dictionary
	Ratio struct{ Zstd, Dict float64 } // on messages ≤ 16 KB, held out from training
}

// NewDataset generates at least bytes of records and trains a dictionary
// on a sample of them.
func NewDataset(seed int64, bytes int64) (*Dataset, error) {
	g, err := metricsgen.New(metricsgen.Config{Seed: seed})
	if err != nil {
		return nil, err
	}
	d := &Dataset{}
	d.Msgs, d.Raw = Pregenerate(g.NextMessage, bytes)
	// Train on every other of the first 1,000 messages (as the agent packs
	// them), and measure the gain on the others that are at most 16 KB.
	var train, test [][]byte
	for i, m := range d.Msgs[:min(len(d.Msgs), 1000)] {
		var b batch.Builder
		for _, r := range m {
			b.Add(r)
		}
		body := append([]byte(nil), b.Bytes()...)
		if i%2 == 0 {
			train = append(train, body)
		} else if len(body) <= 16<<10 {
			test = append(test, body)
		}
	}
	if d.Dict, err = codec.Train(train, 64<<10); err != nil {
		return nil, err
	}
	if d.Ratio.Zstd, d.Ratio.Dict, err = CompareDictionary(d.Dict, test); err != nil {
		return nil, err
	}
	return d, nil
}

// RunWAN sends the dataset in mode m over scenario sc and measures it.
func RunWAN(ctx context.Context, cfg WANConfig, sc Scenario, m Mode, data *Dataset) (WANResult, error) {
	res := WANResult{Scenario: sc.Name, Mode: m.Name, Conns: m.Conns, Window: windowName(m.Window),
		RateBits: sc.Rate * 8, RTT: sc.RTT}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp(cfg.Dir, "sluice-wan-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	sinkAddr, err := freeLoopbackAddr()
	if err != nil {
		return res, err
	}
	var sinkEnv []string
	if cfg.SinkCPUProfile != "" {
		sinkEnv = []string{SinkCPUProfileEnv + "=" + cfg.SinkCPUProfile}
	}
	sink, err := startChild(cfg.Bin, sinkEnv, "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--log-level", "warn")
	if err != nil {
		return res, err
	}
	defer sink.stop()
	if err := waitListening(sinkAddr, 10*time.Second); err != nil {
		return res, fmt.Errorf("sink: %w\n%s", err, sink.output())
	}
	target := sinkAddr
	var link *child
	if sc.Rate > 0 || sc.RTT > 0 {
		linkAddr, err := freeLoopbackAddr()
		if err != nil {
			return res, err
		}
		link, err = startChild(cfg.Bin, nil, "netem", "--listen", linkAddr, "--target", sinkAddr,
			"--rate", strconv.FormatInt(sc.Rate, 10), "--delay", (sc.RTT / 2).String(), "--stats-json")
		if err != nil {
			return res, err
		}
		defer link.stop()
		if err := waitListening(linkAddr, 10*time.Second); err != nil {
			return res, fmt.Errorf("link: %w\n%s", err, link.output())
		}
		target = linkAddr
	}

	// What the run may feed: the dataset once, or up to MaxBytes of it
	// cycled for a Duration run.
	limit := data.Raw
	if cfg.Duration > 0 {
		limit = cfg.MaxBytes
		if limit <= 0 {
			limit = DefaultMaxBytes
		}
	}
	msgRaw := make([]int64, len(data.Msgs))
	for i, msg := range data.Msgs {
		for _, r := range msg {
			msgRaw[i] += int64(len(r))
		}
	}

	agents := make([]*agent.Agent, m.Conns)
	for i := range agents {
		acfg := agent.Config{SinkAddr: target, SpoolDir: filepath.Join(dir, fmt.Sprintf("spool-%d", i)),
			MaxMessageBytes: agent.MaxMessageLimit, Compression: m.Compression, CompressionLevel: cfg.CompressionLevel, MaxInFlightMsgs: m.Window,
			SpoolQuota: SpoolQuota(limit), Logger: cfg.Logger, ReconnectMin: 50 * time.Millisecond}
		if m.Compression == codec.ZstdDict {
			acfg.Dictionary = &data.Dict
		}
		a, err := agent.New(acfg)
		if err != nil {
			return res, err
		}
		defer a.Close()
		agents[i] = a
	}

	// Feed: message k goes to agent k mod conns. A lone agent gets many
	// feeders, as an agent in front of many collectors would: each waits
	// for its message's spool fsync, so the number of feeders bounds what
	// one fsync commits, and feeding must not be what limits the link.
	feedersPer := 1
	if m.Conns < 4 {
		feedersPer = 64 / m.Conns
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Time{}
	if cfg.Duration > 0 {
		deadline = time.Now().Add(cfg.Duration)
	}
	total := int64(len(data.Msgs))
	if cfg.Duration > 0 {
		total = -1 // cycle until the deadline
	}
	var fed, fedBytes, feedErrs atomic.Int64
	var wg sync.WaitGroup
	cpu0, sink0, link0 := selfCPU(), sink.cpu(), link.cpu()
	start := time.Now()
	for ai, a := range agents {
		// Agent ai sends messages ai, ai+conns, ai+2·conns, ...; its
		// feeders share the counter j of the next one.
		var j atomic.Int64
		for f := 0; f < feedersPer; f++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for runCtx.Err() == nil {
					k := int64(ai) + int64(m.Conns)*(j.Add(1)-1)
					if total >= 0 && k >= total {
						return
					}
					i := k % int64(len(data.Msgs))
					if fedBytes.Add(msgRaw[i]) > limit {
						return // a Duration run's data bound
					}
					if err := a.IngestMessage(runCtx, data.Msgs[i]); err != nil {
						if runCtx.Err() == nil {
							feedErrs.Add(1)
							cfg.Logger.Error("ingest failed", "err", err)
						}
						return
					}
					fed.Add(1)
				}
			}()
		}
	}
	feedDone := make(chan struct{})
	go func() { wg.Wait(); close(feedDone) }()

	ackedStats := func() (msgs int64, raw, payload int64, resent uint64) {
		for _, a := range agents {
			st := a.Progress()
			msgs += int64(st.AckedMessages)
			raw += int64(st.AckedRawBytes)
			payload += int64(st.AckedWireBytes)
			resent += st.Resent
		}
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	feeding := true
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-feedDone:
			feeding, feedDone = false, nil
		case <-tick.C:
			if cfg.Progress != nil {
				_, raw, _, resent := ackedStats()
				st := agents[0].Progress()
				goal := fmt.Sprintf("/%.0f MB", float64(data.Raw)/1e6)
				if cfg.Duration > 0 {
					goal = ""
				}
				fmt.Fprintf(cfg.Progress, "  [%s %s] %5.1fs  acked %7.1f%s  %7.1f MB/s  window %s  in-flight %d  rtt %s  resent %d\n",
					sc.Name, m.Name, time.Since(start).Seconds(), float64(raw)/1e6, goal,
					float64(raw)/time.Since(start).Seconds()/1e6, windowString(st), st.InFlightMsgs,
					st.SRTT.Round(time.Millisecond), resent)
			}
		case <-poll.C:
		}
		if feedErrs.Load() > 0 {
			return res, errors.New("ingest failed; see the log")
		}
		msgs, _, _, _ := ackedStats()
		done := !feeding && msgs >= fed.Load()
		if cfg.Duration > 0 && !time.Now().Before(deadline) {
			done = true
		}
		if done {
			break
		}
	}
	res.Elapsed = time.Since(start)
	res.Messages, res.RawBytes, res.PayloadBytes, res.Resent = ackedStats()
	res.AgentCPU, res.SinkCPU, res.LinkCPU = selfCPU()-cpu0, sink.cpu()-sink0, link.cpu()-link0
	cancel()
	if link != nil {
		var st netem.Stats
		out := link.stopAndRead()
		if err := json.Unmarshal(lastLine(out), &st); err == nil {
			res.LinkBytes = st.BytesUp
		} else {
			return res, fmt.Errorf("link statistics: %v: %q", err, out)
		}
	}
	return res, nil
}

func windowName(w int) string {
	if w == 0 {
		return "auto"
	}
	return strconv.Itoa(w)
}

// child is a sluice subcommand run as its own process, so its CPU time can
// be measured apart.
type child struct {
	cmd *exec.Cmd
	out *syncbuf.Buffer
}

// startChild starts bin with args, its environment this process's plus
// env (NAME=value entries).
func startChild(bin string, env []string, args ...string) (*child, error) {
	c := &child{cmd: exec.Command(bin, args...), out: &syncbuf.Buffer{}}
	if env != nil {
		c.cmd.Env = append(os.Environ(), env...)
	}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", bin, args[0], err)
	}
	return c, nil
}

func (c *child) output() string { return c.out.String() }

// cpu is the child's user+system CPU time so far (0 for a nil child).
func (c *child) cpu() time.Duration {
	if c == nil || c.cmd.Process == nil {
		return 0
	}
	return procCPU(c.cmd.Process.Pid)
}

func (c *child) stop() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
	}
}

func (c *child) stopAndRead() string {
	c.stop()
	return c.output()
}

func lastLine(s string) []byte {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return []byte(lines[len(lines)-1])
}

// procCPU reads utime+stime of a process from /proc (Linux; 0 elsewhere).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening after %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Prefix is the dataset cut to its first messages holding at least bytes.
func (d *Dataset) Prefix(bytes int64) *Dataset {
	p := *d
	p.Raw = 0
	for i, m := range d.Msgs {
		for _, r := range m {
			p.Raw += int64(len(r))
		}
		if p.Raw >= bytes {
			p.Msgs = d.Msgs[:i+1]
			break
		}
	}
	return &p
}
