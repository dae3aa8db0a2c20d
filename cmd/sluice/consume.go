package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lines"
	"github.com/sluicehq/sluice/internal/wire"
)

func init() {
	register("consume", "print the records in a sink's store, one per line, in store order", runConsume)
}

// storeOffset is the --from flag: OFFSET, or PARTITION:OFFSET for a
// Kafka-backed sink (packed as the sink expects).
type storeOffset uint64

func (o *storeOffset) String() string { return formatOffset(uint64(*o)) }

func (o *storeOffset) Set(s string) error {
	n, err := wire.ParseOffset(s)
	if err == nil {
		*o = storeOffset(n)
	}
	return err
}

// formatOffset shows an offset as --from takes it (wire.FormatOffset).
func formatOffset(v uint64) string { return wire.FormatOffset(v) }

func runConsume(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("consume", "--sink HOST:PORT [flags]", stderr)
	addr := fs.String("sink", "", "the sink's address, HOST:PORT (required)")
	var from storeOffset
	fs.Var(&from, "from", "store `OFFSET` to start at (default 0: the start, or the group's committed offset with --group);\n"+
		"with a Kafka-backed sink PARTITION:OFFSET, or a plain offset when the topic has one partition")
	follow := fs.Bool("follow", false, "keep printing new records as they are stored, until interrupted")
	group := fs.String("group", "", "consumer group: start at its committed offset and commit after every message printed\n"+
		"(a Kafka-backed sink keeps the offsets in Kafka, as the consumer group NAME of its topic)")
	credits := fs.Uint("credits", 256, "messages the sink may send ahead of what is printed")
	progress := fs.Bool("progress", false, "report progress on stderr")
	raw := fs.Bool("raw", false, "print the records collectors sent (Prometheus remote-write, OTLP) as stored, protobuf bytes,\n"+
		"instead of readably (OTLP as JSON, remote-write samples as Prometheus text exposition lines)")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "sink", *addr); err != nil {
		return err
	}
	if *credits < 2 || *credits > 1<<20 {
		return &exitError{code: 2, msg: "--credits must be between 2 and 1048576"}
	}
	opts, err := cf.clientOptions()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	opts = append(opts, client.SinkAddrs(*addr), client.Follow(*follow), client.Credits(int(*credits)))
	opts = append(opts, lines.ReconnectReporter(stderr, func(err error, addr string) error {
		return cli.DialHint(err, "sink", addr, "--sink", "the sink's --listen address")
	})...)
	if *group != "" {
		opts = append(opts, client.Group(*group))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "from" {
			opts = append(opts, client.From(uint64(from)))
		}
	})
	c, err := client.NewConsumer(opts...)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	sig, stop := signalContext()
	defer stop()

	if *progress {
		defer lines.ReportProgress(c, stderr)()
	}
	p, rerr := lines.Print(sig, c, stdout, lines.PrintOptions{Commit: *group != "", Raw: *raw}, func(err error) error {
		return cli.DialHint(err, "sink", *addr, "--sink", "the sink's --listen address")
	})
	// Closing has the sink apply the last commits (waiting a few seconds).
	if err := c.Close(); err != nil {
		if rerr == nil && sig.Err() == nil {
			rerr = err
		} else {
			fmt.Fprintf(stderr, "consume: %v\n", err)
		}
	}
	last := "none"
	if p.Any {
		last = formatOffset(p.LastOffset)
	}
	fmt.Fprintf(stderr, "consume: %s, %s, last offset %s\n", defaults.Plural(p.Records, "record"), defaults.Plural(p.Bytes, "byte"), last)
	return rerr
}

// clientOptions turns the transport and credential flags into client
// options (transport checks them with the flags' names in its errors).
func (f *clientFlags) clientOptions() ([]client.ConsumerOpt, error) {
	o, err := f.transport()
	if err != nil {
		return nil, err
	}
	var opts []client.ConsumerOpt
	if o.TLS != nil {
		opts = append(opts, client.TLS(o.TLS))
	}
	if o.Token != "" {
		opts = append(opts, client.Token(o.Token))
		if o.AllowTokenWithoutTLS {
			opts = append(opts, client.AllowTokenWithoutTLS())
		}
	}
	return opts, nil
}
