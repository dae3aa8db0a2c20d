package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/chart"
)

func init() {
	register("bench wan", "sync vs async vs zstd vs dictionary over an emulated WAN (the seed's table)", runBenchWAN)
}

func runBenchWAN(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench wan", "[flags]", stderr)
	scenarios := fs.String("scenarios", "seed,thin,lan", "scenarios to run: seed (1Gbit/s, RTT 150ms), thin (40Mbit/s, RTT 40ms), lan (no emulator)")
	modes := fs.String("modes", "sync,async,async+zstd,async+zstd+dict", "modes to compare")
	conns := fs.Int("connections", 54, "connections of the sync mode (one message in flight each)")
	window := fs.String("window", "auto", "window of the async modes: auto or a number of messages")
	dataBytes := byteSize(0)
	fs.Var(&dataBytes, "bytes", "uncompressed bytes each mode sends (default per scenario: seed 384MiB, thin 128MiB, lan 192MiB)")
	dur := fs.Duration("duration", 0, "run each mode this long instead of sending a fixed amount (at most --max-bytes)")
	maxBytes := byteSize(bench.DefaultMaxBytes)
	fs.Var(&maxBytes, "max-bytes", "with --duration: uncompressed bytes each mode may feed; a run ends at --duration or once these are delivered")
	seed := fs.Int64("seed", 1, "seed of the generated metrics")
	csvPath := fs.String("csv", "", "also write the results as CSV to this file")
	svgPath := fs.String("svg", "", "also draw the goodput chart as SVG to this file")
	sweep := fs.Bool("sweep", false, "instead: compare --window auto with fixed windows at several RTTs")
	sweepRTTs := fs.String("sweep-rtts", "1ms,20ms,100ms,300ms", "RTTs of the sweep")
	sweepWindows := fs.String("sweep-windows", "auto,10,100,1000,4000", "windows of the sweep (messages)")
	sweepRate := fs.String("sweep-rate", "200Mbit", "link rate of the sweep")
	sweepDur := fs.Duration("sweep-duration", 8*time.Second, "length of each sweep run")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the agents (this process) to this file")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	if *sweep && bf.reps > 1 {
		return &exitError{code: 2, msg: "--reps applies to the scenario runs, not to --sweep"}
	}
	out := wanOutputs{bf: bf, args: args, csvPath: *csvPath}
	if maxBytes <= 0 {
		return &exitError{code: 2, msg: "--max-bytes must be positive"}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := signalContext()
	defer stop()
	cfg := bench.WANConfig{Bin: bin, Duration: *dur, MaxBytes: int64(maxBytes), Seed: *seed, Progress: stderr, Logger: newLogger(stderr, "error")}

	if *sweep {
		return runSweep(cfg, *sweepRTTs, *sweepWindows, *sweepRate, *sweepDur, out, stdout, stderr)
	}
	win := 0
	if *window != "auto" {
		if win, err = strconv.Atoi(*window); err != nil || win < 1 {
			return &exitError{code: 2, msg: "--window: auto or a positive number"}
		}
	}
	var scs []bench.Scenario
	for _, name := range strings.Split(*scenarios, ",") {
		found := false
		for _, sc := range bench.Scenarios {
			if sc.Name == name {
				if dataBytes > 0 {
					sc.Bytes = int64(dataBytes)
				}
				scs, found = append(scs, sc), true
			}
		}
		if !found {
			return &exitError{code: 2, msg: fmt.Sprintf("unknown scenario %q", name)}
		}
	}
	var ms []bench.Mode
	for _, name := range strings.Split(*modes, ",") {
		found := false
		for _, m := range bench.Modes(*conns, win) {
			if m.Name == name {
				ms, found = append(ms, m), true
			}
		}
		if !found {
			return &exitError{code: 2, msg: fmt.Sprintf("unknown mode %q", name)}
		}
	}
	need := int64(0)
	for _, sc := range scs {
		need = max(need, sc.Bytes)
	}
	if *dur > 0 {
		need = min(64<<20, int64(maxBytes)) // cycled
	}
	fmt.Fprintf(stderr, "generating %s of metrics (seed %d) and training a dictionary ...\n", humanSize(need), *seed)
	data, err := bench.NewDataset(*seed, need)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "data: %d messages, %s, mean message %s; dictionary %d: on held-out messages ≤ 16 KB zstd %.2f×, zstd+dict %.2f× (%.2f× better)\n\n",
		len(data.Msgs), humanSize(data.Raw), humanSize(data.Raw/int64(max(1, len(data.Msgs)))),
		data.Dict.ID, data.Ratio.Zstd, data.Ratio.Dict, data.Ratio.Dict/data.Ratio.Zstd)
	var all, medians []bench.WANResult
	for _, sc := range scs {
		d := data
		if sc.Bytes < data.Raw && *dur == 0 {
			d = data.Prefix(sc.Bytes)
		}
		groups := make([][]bench.WANResult, len(ms))
		for _, step := range bench.RepOrder(bf.reps, len(ms)) {
			m := ms[step.Config]
			fmt.Fprintf(stderr, "[rep %d/%d] %s / %s: %d connection(s), window %s ...\n", step.Rep+1, bf.reps, sc.Name, m.Name, m.Conns, windowFlag(m.Window))
			r, err := bench.RunWAN(ctx, cfg, sc, m, d)
			if err != nil {
				return fmt.Errorf("%s / %s: %w", sc.Name, m.Name, err)
			}
			r.Rep = step.Rep
			groups[step.Config] = append(groups[step.Config], r)
		}
		fmt.Fprintf(stdout, "### %s: %s\n\n", sc.Name, scenarioLabel(sc))
		if bf.reps == 1 {
			var rs []bench.WANResult
			for _, g := range groups {
				rs = append(rs, g...)
			}
			bench.PrintWANTable(stdout, rs)
		} else {
			bench.PrintWANRepsTable(stdout, groups)
		}
		fmt.Fprintln(stdout)
		for _, g := range groups {
			all = append(all, g...)
			medians = append(medians, bench.MedianRun(g))
		}
	}
	if bf.reps > 1 {
		fmt.Fprintln(stdout, repsLine(bf.reps))
	}
	if err := out.write(all); err != nil {
		return err
	}
	if *svgPath != "" {
		f, err := os.Create(*svgPath)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := chart.WAN(f, "sluice bench wan: goodput by mode (uncompressed MB/s, durable at the sink)", medians); err != nil {
			return err
		}
	}
	return nil
}

func windowFlag(w int) string {
	if w == 0 {
		return "auto"
	}
	return strconv.Itoa(w)
}

func scenarioLabel(sc bench.Scenario) string {
	if sc.Rate == 0 && sc.RTT == 0 {
		return "loopback, no emulator"
	}
	return fmt.Sprintf("%s, RTT %s", rateString(sc.Rate), sc.RTT)
}

// wanOutputs are the files a bench wan run writes besides its tables.
type wanOutputs struct {
	bf      *benchFlags
	args    []string
	csvPath string
}

func (o wanOutputs) write(rs []bench.WANResult) error {
	if o.csvPath != "" {
		f, err := os.Create(o.csvPath)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := bench.WriteWANCSV(f, rs); err != nil {
			return err
		}
	}
	return o.bf.write("bench wan", o.args, nil, bench.WANResults(rs), nil)
}

// runSweep compares the auto window with fixed ones at several RTTs.
func runSweep(cfg bench.WANConfig, rttList, winList, rateFlag string, dur time.Duration, out wanOutputs, stdout, stderr io.Writer) error {
	rate, err := parseRate(rateFlag)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	var rtts []time.Duration
	for _, s := range strings.Split(rttList, ",") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return &exitError{code: 2, msg: "--sweep-rtts: " + err.Error()}
		}
		rtts = append(rtts, d)
	}
	var wins []int
	for _, s := range strings.Split(winList, ",") {
		if s == "auto" {
			wins = append(wins, 0)
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return &exitError{code: 2, msg: "--sweep-windows: auto or positive numbers"}
		}
		wins = append(wins, n)
	}
	ctx, stop := signalContext()
	defer stop()
	cfg.Duration = dur
	fmt.Fprintf(stderr, "generating metrics ...\n")
	data, err := bench.NewDataset(cfg.Seed, 64<<20)
	if err != nil {
		return err
	}
	var all []bench.WANResult
	fmt.Fprintf(stdout, "window sweep: async (uncompressed), link %s, %s per run; goodput MB/s\n\n", rateString(rate), dur)
	fmt.Fprint(stdout, "| RTT |")
	for _, w := range wins {
		fmt.Fprintf(stdout, " window %s |", windowFlag(w))
	}
	fmt.Fprintln(stdout, " auto / best fixed |")
	fmt.Fprint(stdout, "|---:|", strings.Repeat("---:|", len(wins)+1), "\n")
	for _, rtt := range rtts {
		sc := bench.Scenario{Name: "rtt-" + rtt.String(), Rate: rate, RTT: rtt}
		row := fmt.Sprintf("| %s |", rtt)
		var auto, best float64
		for _, w := range wins {
			m := bench.Mode{Name: "async-w" + windowFlag(w), Conns: 1, Window: w, Compression: codec.Plain}
			fmt.Fprintf(stderr, "sweep: RTT %s, window %s ...\n", rtt, windowFlag(w))
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
	return out.write(all)
}
