package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lines"
)

func runProduce(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("produce", "--agent HOST:PORT [--file F] [flags]", stderr)
	addr := fs.String("agent", "127.0.0.1:7401", "the agent's ingest address")
	file := fs.String("file", "", "read lines from this file instead of stdin")
	batchBytes := byteSize(1 << 20)
	fs.Var(&batchBytes, "batch-bytes", "lines per HTTP request, in bytes")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up when the agent has been unreachable or refusing (spool full, restarting) this long;\n"+
		"until then produce retries and counts down on stderr (e.g. --timeout 5s to fail fast)")
	progress := fs.Bool("progress", false, "print progress to stderr every second")
	var cf clientFlags // to the agent's ingest here: its --ingest-tls-cert, --ingest-tokens
	cf.register(fs)
	fs.Lookup("token").Usage, fs.Lookup("tls-ca").Usage = "bearer token, one of the agent's --ingest-tokens", "connect with HTTPS, trusting this CA bundle (PEM)"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	creds, err := cf.clientOptions()
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if *timeout <= 0 {
		return &exitError{code: 2, msg: "--timeout must be positive"}
	}
	in := io.Reader(os.Stdin)
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var id [8]byte
	rand.Read(id[:])
	// Every batch carries the producer id and its sequence number, so a
	// retry of a batch the agent spooled before crashing is not spooled
	// twice; the client reports an unreachable agent at once and counts
	// down while it retries, so it never looks like a hang.
	opts := []client.HTTPOpt{client.RetryTimeout(*timeout), client.ProducerID("produce-" + hex.EncodeToString(id[:])), client.OnRetryStatus(lines.RetryReporter(stderr))}
	for _, o := range creds {
		opts = append(opts, o.(client.HTTPOpt)) // TLS and Token are options of every client
	}
	p, err := client.NewHTTPProducer(*addr, opts...)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	defer p.Close()
	start := time.Now()
	read, err := lines.Send(p, in, int(batchBytes), func(sent int, err error) error {
		if errors.Is(err, client.ErrAgentUnavailable) {
			err = fmt.Errorf("%w (--timeout)", err)
		}
		if errors.Is(err, client.ErrRecordTooLarge) {
			err = fmt.Errorf("%w (requests are up to --batch-bytes, %s)", err, batchBytes.String())
		}
		return fmt.Errorf("after %d lines: %w", sent, cli.DialHint(err, "agent", *addr, "--agent", "the agent's --ingest address"))
	}, lines.ProgressEvery(*progress, stderr))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "produce: %s spooled in %s\n", defaults.Plural(read, "line"), time.Since(start).Round(time.Millisecond))
	if why := p.SinkDown(); why != "" {
		fmt.Fprintf(stderr, "produce: the agent at %s is %s; the lines wait in its spool and are delivered once it reaches the sink\n", *addr, why)
	}
	return nil
}
