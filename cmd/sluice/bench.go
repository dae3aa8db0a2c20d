package main

import (
	"flag"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/benchkit"
	"github.com/sluicehq/sluice/internal/lab/deliverybench"
)

func init() {
	register("bench delivery", "agent → sink on loopback beside raw log appends of the same message size", runBenchDelivery)
}

func runBenchDelivery(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench delivery", "[flags]", stderr)
	dur := fs.Duration("duration", 8*time.Second, "feeding time per delivery run (and log time)")
	recSize := byteSize(200)
	fs.Var(&recSize, "record", "record size")
	msgSize := byteSize(256 << 10)
	fs.Var(&msgSize, "message", "message size (records are packed up to it)")
	modes := fs.String("compression", "plain,zstd", "comma-separated runs: plain, zstd, zstd-fastest (zstd at --compression-level fastest)")
	feeders := fs.Int("feeders", 16, "concurrent producers calling the agent")
	transports := fs.String("transport", "grpc", "comma-separated transports agent → sink, run side by side: grpc, rsocket")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the delivery runs to this file")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	cfg := deliverybench.Config{Duration: *dur, RecordSize: int(recSize), MessageSize: int(msgSize),
		Modes: strings.Split(*modes, ","), Feeders: *feeders, Transports: strings.Split(*transports, ","),
		CPUProfile: *cpuProfile, Report: bf.report("bench delivery", args)}
	if err := cfg.Validate(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	ctx, stop := signalContext()
	defer stop()
	return deliverybench.Run(ctx, cfg, stdout, stderr)
}

// benchFlags are the flags every bench command shares.
type benchFlags struct {
	reps     int
	jsonPath string
}

func addBenchFlags(fs *flag.FlagSet) *benchFlags {
	bf := &benchFlags{}
	fs.IntVar(&bf.reps, "reps", 1, "run each configuration this many times, alternating their order between reps; tables show the median and (min–max)")
	fs.StringVar(&bf.jsonPath, "json", "", "also write every run's parameters and results, their medians and the machine (GOMAXPROCS, Go version, date, git revision) as JSON to this file")
	return bf
}

func (bf *benchFlags) check() error {
	if bf.reps < 1 {
		return &exitError{code: 2, msg: "--reps must be at least 1"}
	}
	return nil
}

// report is where command's results go: its --reps and --json.
func (bf *benchFlags) report(command string, args []string) benchkit.Report {
	return benchkit.Report{Command: command, Args: args, Reps: bf.reps, JSONPath: bf.jsonPath}
}
