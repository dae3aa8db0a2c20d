package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/rwbench"
)

func init() {
	register("bench remote-write", "Prometheus remote-writing over an emulated WAN straight to a receiver, against through agent → sink → exporter", runBenchRemoteWrite)
}

func runBenchRemoteWrite(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench remote-write", "[flags]", stderr)
	scenarios := fs.String("scenarios", "thin,seed", "links to run: thin (40Mbit/s, RTT 40ms), seed (1Gbit/s, RTT 150ms), lan (the link proxy without limits)")
	paths := fs.String("paths", "direct,sluice,sluice+dict", "paths to compare: direct (Prometheus → link → receiver), sluice (Prometheus → agent → link → sink → receiver), sluice+dict (the agent with a dictionary trained on the workload)")
	hosts := fs.Int("hosts", 10, "hosts of the generated fleet Prometheus scrapes besides itself (about 350 series each)")
	seed := fs.Int64("seed", 1, "seed of the generated fleet")
	dur := fs.Duration("duration", 30*time.Second, "steady window measured in each run")
	outage := fs.Duration("outage", 60*time.Second, "how long the link is cut after the steady window (0: no outage; the issue's run is 10m)")
	train := fs.Duration("train", 20*time.Second, "how long the dictionary's training run collects the workload's records")
	dictSize := byteSize(1 << 20)
	fs.Var(&dictSize, "dict-size", "size of the sluice+dict path's dictionary (at most 1MiB): large enough to hold the label sets every request repeats")
	agentFlags := fs.String("agent-flags", "", "extra flags of the agent on the sluice paths, e.g. \"--linger 5s --compression-level better\" (default: the agent's defaults)")
	prom := fs.String("prometheus", "prometheus", "the prometheus binary (Debian's: bash scripts/install-prometheus.sh)")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := bf.check(); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	cfg := rwbench.Config{Bin: bin, Prometheus: *prom, Scenarios: strings.Split(*scenarios, ","), Paths: strings.Split(*paths, ","),
		Hosts: *hosts, Seed: *seed, Duration: *dur, Outage: *outage, Train: *train, DictSize: strconv.FormatInt(int64(dictSize), 10), AgentFlags: strings.Fields(*agentFlags), Report: bf.report("bench remote-write", args)}
	if _, err := cfg.Plan(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	ctx, stop := signalContext()
	defer stop()
	return rwbench.Run(ctx, cfg, stdout, stderr)
}
