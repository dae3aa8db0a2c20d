package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/lab/metricsgen"
)

func init() {
	register("gen metrics", "write realistic Prometheus-style sample lines, deterministically from a seed", genMetrics)
}

const genMetricsAbout = `Writes samples of a simulated fleet (node_exporter on every host, plus HTTP
services, nginx, PostgreSQL and Kafka exporters) in the Prometheus text format
with timestamps, one per line:

  name{label="value",...} value timestamp_ms

Timestamps are simulated (scrapes every 15s from 2023-11-14T22:13:20Z), so the
same seed and flags give the same bytes on every run.

With --messages the lines are grouped into messages as an edge collector
batches them (hash partitions flushed at log-normal sizes: 2KiB to 400KiB,
mean --mean-message); an empty line separates two messages. The size of a
message is the sum of its lines without their newlines.

Output stops once --bytes have been written (counting newlines and, with
--messages, the separating empty lines) or --records lines: at the end of a
line, or with --messages at the end of a message, so it may run over by
one line or one message.
`

func genMetrics(args []string, stdout, stderr io.Writer) error {
	const argsHelp = "[--seed N] [--hosts N] [--bytes SIZE | --records N] [--messages] [--mean-message SIZE]"
	fs := newFlags("gen metrics", argsHelp, stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice gen metrics %s\n\n%s\nFlags:\n", argsHelp, genMetricsAbout)
		fs.PrintDefaults()
	}
	seed := fs.Int64("seed", 1, "random seed: the fleet and every value follow from it")
	hosts := fs.Int("hosts", metricsgen.DefaultHosts, "machines in the fleet (about 350 series each)")
	limit := byteSize(10 << 20)
	fs.Var(&limit, "bytes", "stop once this much output has been written")
	records := fs.Int64("records", 0, "stop after this many lines instead of --bytes")
	messages := fs.Bool("messages", false, "group lines into messages, separated by an empty line")
	mean := byteSize(metricsgen.DefaultMeanMessageBytes)
	fs.Var(&mean, "mean-message", "mean message size with --messages")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["bytes"] && set["records"]:
		return usageError(fs, "use --bytes or --records, not both")
	case *records < 0:
		return usageError(fs, "--records must not be negative")
	case set["mean-message"] && !*messages:
		return usageError(fs, "--mean-message needs --messages")
	case int64(mean) > 1<<30:
		return usageError(fs, "--mean-message is too large")
	}
	g, err := metricsgen.New(metricsgen.Config{Seed: *seed, Hosts: *hosts, MeanMessageBytes: int(mean)})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}

	return g.Write(stdout, metricsgen.Limit{Bytes: int64(limit), ByRecords: set["records"], Records: *records, Messages: *messages})
}
