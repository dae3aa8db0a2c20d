package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/metricsgen"
	"github.com/sluicehq/sluice/internal/logutil"
)

func init() {
	register("demo", "run a sink, an agent and a metrics generator in one process and show delivery", runDemo)
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", "[flags]", stderr)
	dur := fs.Duration("duration", defaults.DemoDuration, "how long the generator feeds the agent")
	feeders := fs.Int("feeders", defaults.DemoFeeders, "concurrent producers calling the agent")
	hosts := fs.Int("hosts", metricsgen.DefaultHosts, "simulated hosts (about 350 series each)")
	dir := fs.String("dir", "", "where the spool and store go (default: a temporary directory, removed afterwards)")
	logLevel := cliflag.LogLevel(fs, defaults.DemoLogLevel, "log level of the embedded agent and sink")
	var af agentFlags
	af.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	acfg, err := af.config("", "")
	if err == nil && (*dur <= 0 || *feeders < 1 || *hosts < 1) {
		err = errors.New("--duration, --feeders and --hosts must be positive")
	}
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	ctx, stop := signalContext()
	defer stop()
	fmt.Fprintf(stdout, "sluice demo: %d simulated hosts → agent (spool, %s) → one gRPC stream → sink (store), for %s\n\n",
		*hosts, af.compression, *dur)
	res, err := bench.RunPipeline(ctx, bench.PipelineConfig{
		Dir: *dir, Duration: *dur, Feeders: *feeders,
		NewSource: func(i int) bench.Source {
			g, err := metricsgen.New(metricsgen.Config{Seed: int64(i + 1), Hosts: *hosts})
			if err != nil {
				panic(err) // the config is built above and valid
			}
			return bench.Source(g.NextMessage)
		},
		Agent:    acfg,
		Logger:   logutil.NewLogger(stderr, *logLevel),
		Progress: stdout,
	})
	if err != nil {
		return err
	}
	st := res.Agent
	fmt.Fprintf(stdout, "\nsummary: %s (%s) delivered and durably stored in %s: %.0f records/s, %.1f MB/s\n",
		defaults.Plural(st.AckedRecords, "record"), humanSize(int64(st.AckedRawBytes)), res.Elapsed.Round(time.Millisecond), res.RecordsPerSec(), res.MBps())
	fmt.Fprintf(stdout, "         %s, compression %.2fx (%s on the wire), %d resent\n",
		defaults.Plural(st.AckedMessages, "message"), res.CompressionRatio(), humanSize(int64(st.AckedWireBytes)), st.Resent)
	fmt.Fprintf(stdout, "         spool → ack latency p50 %s, p99 %s, max %s\n",
		st.LatencyP50, st.LatencyP99, st.LatencyMax)
	if !res.Drained {
		return &exitError{code: 1, msg: fmt.Sprintf("%s still unacknowledged after the drain timeout", defaults.Plural(st.SpooledMessages-st.AckedMessages, "message"))}
	}
	return nil
}
