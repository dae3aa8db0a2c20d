// Package rwbench is `sluice bench remote-write`: the same Prometheus
// workload remote-written over an emulated WAN link (internal/lab/netem)
// straight to a receiving Prometheus, against through a sluice agent,
// the link, a sink and its remote-write exporter to the same receiver.
// It reports bytes on the link per sample, samples delivered per second,
// the delay from scrape to receiver, and what each path loses across a
// cut of the link (issue 28). Prometheus is Debian's
// (scripts/install-prometheus.sh); everything runs on loopback.
package rwbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
)

// Scenario is a link: Rate bytes/s each way (0: unlimited) and RTT.
type Scenario struct {
	Name string
	Rate int64
	RTT  time.Duration
}

// Scenarios are the links a run may name: the two of "Asynchronous
// Messaging Over gRPC" and loopback through the proxy without limits.
var Scenarios = []Scenario{
	{Name: "thin", Rate: 40e6 / 8, RTT: 40 * time.Millisecond},
	{Name: "seed", Rate: 1e9 / 8, RTT: 150 * time.Millisecond},
	{Name: "lan"},
}

// Config is one `sluice bench remote-write`.
type Config struct {
	Bin        string        // the sluice binary (agent, sink, dict train)
	Prometheus string        // the prometheus binary
	Scenarios  []string      // names in Scenarios
	Paths      []string      // Direct, Sluice, SluiceDict
	Hosts      int           // hosts of the generated fleet Prometheus scrapes (about 350 series each)
	Seed       int64         // seed of the fleet
	Duration   time.Duration // the steady window measured
	Outage     time.Duration // how long the link is cut (0: no outage)
	Train      time.Duration // how long the dictionary's training run collects records
	AgentFlags []string      // extra flags of the agent on the sluice paths
	DictSize   string        // the dictionary's size (dict train --size)
	Report     benchkit.Report
}

// Plan resolves the scenario and path names, in the flags' words on error.
func (c Config) Plan() ([]Scenario, error) {
	var scs []Scenario
	for _, name := range c.Scenarios {
		i := -1
		for j, sc := range Scenarios {
			if sc.Name == name {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("--scenarios: unknown scenario %q (thin, seed, lan)", name)
		}
		scs = append(scs, Scenarios[i])
	}
	for _, p := range c.Paths {
		if p != Direct && p != Sluice && p != SluiceDict {
			return nil, fmt.Errorf("--paths: unknown path %q (direct, sluice, sluice+dict)", p)
		}
	}
	if c.Hosts < 1 || c.Duration < time.Second || c.Outage < 0 {
		return nil, fmt.Errorf("--hosts must be positive, --duration at least 1s, --outage not negative")
	}
	return scs, nil
}

// Run trains the dictionary if a path needs it, runs every path in
// every scenario, reps in alternating order, and prints a table per
// scenario.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	scs, err := c.Plan()
	if err != nil {
		return err
	}
	dict := ""
	for _, p := range c.Paths {
		if p == SluiceDict && dict == "" {
			dir, err := os.MkdirTemp("", "sluice-rwbench-dict-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			dict = filepath.Join(dir, "remote-write.dict")
			if err := c.trainDict(ctx, dict, stdout, stderr); err != nil {
				return fmt.Errorf("training the dictionary: %w", err)
			}
		}
	}
	var rs bench.Results
	for _, sc := range scs {
		for _, step := range bench.RepOrder(c.Report.Reps, len(c.Paths)) {
			path := c.Paths[step.Config]
			fmt.Fprintf(stderr, "[rep %d/%d] %s / %s ...\n", step.Rep+1, c.Report.Reps, sc.Name, path)
			m, err := c.runOne(ctx, sc, path, dict)
			if err != nil {
				return fmt.Errorf("%s / %s: %w", sc.Name, path, err)
			}
			rs.Add(sc.Name+"/"+path, map[string]any{"scenario": sc.Name, "path": path,
				"rate_bits": sc.Rate * 8, "rtt_ms": sc.RTT.Milliseconds()}, m)
		}
		fmt.Fprintf(stdout, "### %s: %s\n\n", sc.Name, label(sc))
		PrintTable(stdout, &rs, sc.Name, c.Paths)
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "%s; Prometheus scrapes itself and a generated fleet of %d hosts every second; steady window %s, outage %s; agent flags: %s\n",
		benchkit.RepsLine(c.Report.Reps), c.Hosts, c.Duration, c.Outage, agentFlagsString(c.AgentFlags))
	params := map[string]any{"agent_flags": agentFlagsString(c.AgentFlags), "hosts": c.Hosts, "seed": c.Seed, "duration_s": c.Duration.Seconds(),
		"outage_s": c.Outage.Seconds(), "scrape_interval_s": 1}
	return c.Report.Write(params, rs, nil)
}

// runOne is one path through one scenario: start, steady window, outage.
func (c Config) runOne(ctx context.Context, sc Scenario, path, dict string) (bench.Metrics, error) {
	r := &run{c: c, sc: sc, path: path}
	defer r.close()
	if path != SluiceDict {
		dict = ""
	}
	if err := r.start(ctx, dict); err != nil {
		return nil, err
	}
	m := bench.Metrics{}
	if err := r.steady(ctx, m); err != nil {
		return nil, err
	}
	if c.Outage > 0 {
		if err := r.outage(ctx, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// trainDict runs the sluice path on loopback for c.Train and trains a
// dictionary on the records the sink stored (`sluice dict train
// --records-from`): the workload's own remote-write requests.
func (c Config) trainDict(ctx context.Context, out string, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "training a dictionary on %s of the workload ...\n", c.Train)
	// The agent's defaults: a long --linger holds Prometheus' requests
	// back, and the training run only needs the requests.
	c.AgentFlags = nil
	r := &run{c: c, sc: Scenarios[2], path: Sluice}
	defer r.close()
	if err := r.start(ctx, ""); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(c.Train):
	}
	sinkAddr := r.link.l.Config().Target
	// Messages as the agent's defaults make them: about one remote-write
	// request each (a columnar request of the fleet is ~19 KB, over
	// 16 KiB, so a message of its own), so that the dictionary learns
	// what every request repeats, the label names and values of its
	// series, and a short run (TestBenchRemoteWriteSmoke's 6 s) still
	// gives the trainer its 8 samples.
	p, err := startProc("dict train", c.Bin, "dict", "train", "--records-from", sinkAddr, "--message", "16KiB",
		"--size", c.DictSize, "--out", out)
	if err != nil {
		return err
	}
	if err := p.wait(); err != nil {
		return p.fail(err)
	}
	fmt.Fprintf(stdout, "%s\n", strings.TrimSpace(p.out.String()))
	return nil
}

// pairedRatio is base's metric over row's, each rep paired with the
// base's run of the same rep (they ran side by side) before the median.
func pairedRatio(base, row *bench.Row, metric string) bench.Stat {
	var xs []float64
	for i := range min(len(base.Reps), len(row.Reps)) {
		b, okb := base.Reps[i][metric]
		r, okr := row.Reps[i][metric]
		if okb && okr && r > 0 {
			xs = append(xs, b/r)
		}
	}
	return bench.Summarize(xs)
}

func agentFlagsString(f []string) string {
	if len(f) == 0 {
		return "(defaults)"
	}
	return strings.Join(f, " ")
}

func label(sc Scenario) string {
	if sc.Rate == 0 && sc.RTT == 0 {
		return "loopback through the link proxy, no limits"
	}
	return fmt.Sprintf("%s, RTT %s", defaults.RateString(sc.Rate), sc.RTT)
}

// PrintTable prints one scenario's rows, each path against direct: the
// bench's output, and docs/benchmarks.md's tables generated from its
// --json (internal/docs TestBenchTables).
func PrintTable(w io.Writer, rs *bench.Results, scenario string, paths []string) {
	fmt.Fprintln(w, "| path | link bytes/sample | direct / this | Prometheus snappy bytes/sample | samples/s delivered | delay p50 | outage: samples | lost | catch-up |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	direct := rs.Row(scenario + "/" + Direct)
	for _, p := range paths {
		row := rs.Row(scenario + "/" + p)
		if row == nil {
			continue
		}
		ratio := "–"
		if direct != nil {
			ratio = pairedRatio(direct, row, "link_bytes_per_sample").FormatUnit(2, "×")
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p,
			row.Stat("link_bytes_per_sample").Format(2), ratio, row.Stat("snappy_bytes_per_sample").Format(2),
			row.Stat("samples_per_sec").Format(0), row.Stat("delay_p50_s").FormatDuration(),
			row.Stat("outage_samples").Format(0), row.Stat("outage_lost").Format(0), row.Stat("catch_up_s").FormatDuration())
	}
}
