// Package wanbench is `sluice bench wan`: sync against async delivery,
// plain, zstd and zstd with a dictionary, over an emulated WAN (the
// table of "Asynchronous Messaging Over gRPC"), and the sweep of the async window at several RTTs.
package wanbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/lab/chart"
)

// Config is one `sluice bench wan`.
type Config struct {
	WAN        bench.WANConfig // Bin, Duration, MaxBytes, Seed, Progress, Logger
	Scenarios  []string        // names in bench.Scenarios
	Modes      []string        // names in bench.Modes
	Conns      int             // connections of the sync mode
	Window     int             // window of the async modes (0: auto)
	Bytes      int64           // uncompressed bytes per mode (0: the scenario's own)
	CSVPath    string          // also write the results as CSV ("": none)
	SVGPath    string          // also draw the goodput chart ("": none)
	CPUProfile string          // profile this process's agents ("": none)
	// SinkCPUProfile, when set, is the prefix of the files each run's sink
	// child profiles itself to: PREFIX.SCENARIO.MODE.REP (REP from 1).
	SinkCPUProfile string
	Report         benchkit.Report
}

// Plan resolves the scenario and mode names, in the flags' words on error.
func (c Config) Plan() ([]bench.Scenario, []bench.Mode, error) {
	var scs []bench.Scenario
	for _, name := range c.Scenarios {
		found := false
		for _, sc := range bench.Scenarios {
			if sc.Name == name {
				if c.Bytes > 0 {
					sc.Bytes = c.Bytes
				}
				scs, found = append(scs, sc), true
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("unknown scenario %q", name)
		}
	}
	var ms []bench.Mode
	for _, name := range c.Modes {
		found := false
		for _, m := range bench.Modes(c.Conns, c.Window) {
			if m.Name == name {
				ms, found = append(ms, m), true
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("unknown mode %q", name)
		}
	}
	return scs, ms, nil
}

// Run runs every mode in every scenario (Plan's), prints a table per
// scenario and writes the files asked for.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	scs, ms, err := c.Plan()
	if err != nil {
		return err
	}
	stopProfile, err := benchkit.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	data, err := c.dataset(scs, stdout, stderr)
	if err != nil {
		return err
	}
	var all, medians []bench.WANResult
	for _, sc := range scs {
		groups, err := c.scenario(ctx, sc, ms, data, stdout, stderr)
		if err != nil {
			return err
		}
		for _, g := range groups {
			all = append(all, g...)
			medians = append(medians, bench.MedianRun(g))
		}
	}
	if c.Report.Reps > 1 {
		fmt.Fprintln(stdout, benchkit.RepsLine(c.Report.Reps))
	}
	if err := writeResults(c.Report, c.CSVPath, all); err != nil {
		return err
	}
	if c.SVGPath == "" {
		return nil
	}
	f, err := os.Create(c.SVGPath)
	if err != nil {
		return err
	}
	defer f.Close()
	return chart.WAN(f, "sluice bench wan: goodput by mode (uncompressed MB/s, durable at the sink)", medians)
}

// dataset generates the metrics every mode sends and trains a dictionary.
func (c Config) dataset(scs []bench.Scenario, stdout, stderr io.Writer) (*bench.Dataset, error) {
	need := int64(0)
	for _, sc := range scs {
		need = max(need, sc.Bytes)
	}
	if c.WAN.Duration > 0 {
		need = min(64<<20, c.WAN.MaxBytes) // cycled
	}
	fmt.Fprintf(stderr, "generating %s of metrics (seed %d) and training a dictionary ...\n", defaults.HumanSize(need), c.WAN.Seed)
	data, err := bench.NewDataset(c.WAN.Seed, need)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "data: %d messages, %s, mean message %s; dictionary %d: on held-out messages ≤ 16 KB zstd %.2f×, zstd+dict %.2f× (%.2f× better)\n\n",
		len(data.Msgs), defaults.HumanSize(data.Raw), defaults.HumanSize(data.Raw/int64(max(1, len(data.Msgs)))),
		data.Dict.ID, data.Ratio.Zstd, data.Ratio.Dict, data.Ratio.Dict/data.Ratio.Zstd)
	return data, nil
}

// sinkProfilePath is the file the sink of one run (rep from 0) profiles
// itself to, for Config.SinkCPUProfile prefix.
func sinkProfilePath(prefix, scenario, mode string, rep int) string {
	return fmt.Sprintf("%s.%s.%s.%d", prefix, scenario, mode, rep+1)
}

// scenario runs every mode of one scenario, reps in alternating order,
// and prints its table; it returns each mode's runs.
func (c Config) scenario(ctx context.Context, sc bench.Scenario, ms []bench.Mode, data *bench.Dataset, stdout, stderr io.Writer) ([][]bench.WANResult, error) {
	reps := c.Report.Reps
	d := data
	if sc.Bytes < data.Raw && c.WAN.Duration == 0 {
		d = data.Prefix(sc.Bytes)
	}
	groups := make([][]bench.WANResult, len(ms))
	for _, step := range bench.RepOrder(reps, len(ms)) {
		m := ms[step.Config]
		fmt.Fprintf(stderr, "[rep %d/%d] %s / %s: %d connection(s), window %s ...\n", step.Rep+1, reps, sc.Name, m.Name, m.Conns, windowName(m.Window))
		wan := c.WAN
		if c.SinkCPUProfile != "" {
			wan.SinkCPUProfile = sinkProfilePath(c.SinkCPUProfile, sc.Name, m.Name, step.Rep)
		}
		r, err := bench.RunWAN(ctx, wan, sc, m, d)
		if err != nil {
			return nil, fmt.Errorf("%s / %s: %w", sc.Name, m.Name, err)
		}
		r.Rep = step.Rep
		groups[step.Config] = append(groups[step.Config], r)
	}
	fmt.Fprintf(stdout, "### %s: %s\n\n", sc.Name, scenarioLabel(sc))
	if reps == 1 {
		var rs []bench.WANResult
		for _, g := range groups {
			rs = append(rs, g...)
		}
		bench.PrintWANTable(stdout, rs)
	} else {
		bench.PrintWANRepsTable(stdout, groups)
	}
	fmt.Fprintln(stdout)
	return groups, nil
}

// Sweep compares the auto window with fixed ones at several RTTs.
type Sweep struct {
	WAN      bench.WANConfig
	RTTs     []time.Duration
	Windows  []int // 0: auto
	Rate     int64 // link rate, bytes per second
	Duration time.Duration
	CSVPath  string
	Report   benchkit.Report
}

// ParseSweep reads the --sweep-rtts and --sweep-windows lists (a
// window "auto" is 0), in the flags' words on error.
func ParseSweep(rttList, winList string) (rtts []time.Duration, wins []int, err error) {
	for _, r := range strings.Split(rttList, ",") {
		d, err := time.ParseDuration(r)
		if err != nil {
			return nil, nil, fmt.Errorf("--sweep-rtts: %w", err)
		}
		rtts = append(rtts, d)
	}
	for _, w := range strings.Split(winList, ",") {
		if w == "auto" {
			wins = append(wins, 0)
			continue
		}
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			return nil, nil, fmt.Errorf("--sweep-windows: auto or positive numbers")
		}
		wins = append(wins, n)
	}
	return rtts, wins, nil
}

// RunSweep runs the sweep and prints its table: goodput per RTT and
// window, and auto over the best fixed window.
func RunSweep(ctx context.Context, s Sweep, stdout, stderr io.Writer) error {
	cfg := s.WAN
	cfg.Duration = s.Duration
	fmt.Fprintf(stderr, "generating metrics ...\n")
	data, err := bench.NewDataset(cfg.Seed, 64<<20)
	if err != nil {
		return err
	}
	var all []bench.WANResult
	fmt.Fprintf(stdout, "window sweep: async (uncompressed), link %s, %s per run; goodput MB/s\n\n", defaults.RateString(s.Rate), s.Duration)
	fmt.Fprint(stdout, "| RTT |")
	for _, w := range s.Windows {
		fmt.Fprintf(stdout, " window %s |", windowName(w))
	}
	fmt.Fprintln(stdout, " auto / best fixed |")
	fmt.Fprint(stdout, "|---:|", strings.Repeat("---:|", len(s.Windows)+1), "\n")
	for _, rtt := range s.RTTs {
		sc := bench.Scenario{Name: "rtt-" + rtt.String(), Rate: s.Rate, RTT: rtt}
		row := fmt.Sprintf("| %s |", rtt)
		var auto, best float64
		for _, w := range s.Windows {
			m := bench.Mode{Name: "async-w" + windowName(w), Conns: 1, Window: w, Compression: codec.Plain}
			fmt.Fprintf(stderr, "sweep: RTT %s, window %s ...\n", rtt, windowName(w))
			r, err := bench.RunWAN(ctx, cfg, sc, m, data)
			if err != nil {
				return err
			}
			all = append(all, r)
			g := r.GoodputMBps()
			row += fmt.Sprintf(" %.1f |", g)
			if w == 0 {
				auto = g
			} else {
				best = max(best, g)
			}
		}
		fmt.Fprintf(stdout, "%s %.0f%% |\n", row, 100*auto/best)
	}
	return writeResults(s.Report, s.CSVPath, all)
}

// writeResults writes the CSV and the --json report, if asked for.
func writeResults(report benchkit.Report, csvPath string, rs []bench.WANResult) error {
	if csvPath != "" {
		f, err := os.Create(csvPath)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := bench.WriteWANCSV(f, rs); err != nil {
			return err
		}
	}
	return report.Write(nil, bench.WANResults(rs), nil)
}

func windowName(w int) string {
	if w == 0 {
		return "auto"
	}
	return strconv.Itoa(w)
}

func scenarioLabel(sc bench.Scenario) string {
	if sc.Rate == 0 && sc.RTT == 0 {
		return "loopback, no emulator"
	}
	return fmt.Sprintf("%s, RTT %s", defaults.RateString(sc.Rate), sc.RTT)
}
