package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/lab/wanbench"
	"github.com/sluicehq/sluice/internal/logutil"
)

func init() {
	register("bench wan", "sync vs async vs zstd vs dictionary over an emulated WAN (the table of \"Asynchronous Messaging Over gRPC\")", runBenchWAN)
}

func runBenchWAN(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench wan", "[flags]", stderr)
	scenarios := fs.String("scenarios", "seed,thin,lan", "scenarios to run: seed (the WAN of \"Asynchronous Messaging Over gRPC\": 1Gbit/s, RTT 150ms), thin (its overloaded site: 40Mbit/s, RTT 40ms), lan (no emulator)")
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
	level := fs.String("compression-level", "default", "zstd effort of the agents' compressed modes: default, fastest or better (as sluice agent's flag)")
	sinkProfile := fs.String("sink-cpuprofile", "", "write a CPU profile of each run's sink (a child process) to PREFIX.SCENARIO.MODE.REP (profiling adds a little to its CPU seconds)")
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
	if *sweep && *sinkProfile != "" {
		return &exitError{code: 2, msg: "--sink-cpuprofile applies to the scenario runs, not to --sweep"}
	}
	if maxBytes <= 0 {
		return &exitError{code: 2, msg: "--max-bytes must be positive"}
	}
	compressionLevel, err := parseLevelFlag(*level)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	wan := bench.WANConfig{Bin: bin, Duration: *dur, MaxBytes: int64(maxBytes), Seed: *seed, Progress: stderr, Logger: logutil.NewLogger(stderr, "error"), CompressionLevel: compressionLevel}
	if *sweep {
		rate, err := parseRate(*sweepRate)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		rtts, wins, err := wanbench.ParseSweep(*sweepRTTs, *sweepWindows)
		if err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		sw := wanbench.Sweep{WAN: wan, RTTs: rtts, Windows: wins, Rate: rate, Duration: *sweepDur, CSVPath: *csvPath, Report: bf.report("bench wan", args)}
		stopProfile, err := benchkit.StartCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
		return wanbench.RunSweep(ctx, sw, stdout, stderr)
	}
	win := 0
	if *window != "auto" {
		if win, err = strconv.Atoi(*window); err != nil || win < 1 {
			return &exitError{code: 2, msg: "--window: auto or a positive number"}
		}
	}
	cfg := wanbench.Config{WAN: wan, Scenarios: strings.Split(*scenarios, ","), Modes: strings.Split(*modes, ","),
		Conns: *conns, Window: win, Bytes: int64(dataBytes), CSVPath: *csvPath, SVGPath: *svgPath,
		CPUProfile: *cpuProfile, SinkCPUProfile: *sinkProfile, Report: bf.report("bench wan", args)}
	if _, _, err := cfg.Plan(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	return wanbench.Run(ctx, cfg, stdout, stderr)
}

// parseLevelFlag reads --compression-level; an unknown level is a usage
// error.
func parseLevelFlag(v string) (codec.Level, error) {
	l, err := codec.ParseLevel(v)
	if err != nil {
		return l, &exitError{code: 2, msg: "--compression-level: " + err.Error()}
	}
	return l, nil
}
