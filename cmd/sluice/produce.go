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
	fs := newFlags("produce", "--agent HOST:PORT [--file F]", stderr)
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
	opts := []client.HTTPOpt{client.RetryTimeout(*timeout), client.ProducerID("produce-" + hex.EncodeToString(id[:])), client.OnRetryStatus(retryReporter(stderr))}
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
	}, progressEvery(*progress, stderr))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "produce: %s spooled in %s\n", defaults.Plural(read, "line"), time.Since(start).Round(time.Millisecond))
	if why := p.SinkDown(); why != "" {
		fmt.Fprintf(stderr, "produce: the agent at %s is %s; the lines wait in its spool and are delivered once it reaches the sink\n", *addr, why)
	}
	return nil
}

// retryReporter says on stderr when the agent fails and when it answers
// again, counting down to --timeout, so that a retry never looks like a
// hang: at 2, 4, 8 and 16 s of failing, then every 30 s (the client
// reports every 2 s; 300 lines in a 10-minute outage buried the cause).
func retryReporter(stderr io.Writer) func(client.RetryStatus) {
	next := 2 * time.Second
	return func(st client.RetryStatus) {
		switch {
		case !st.Failing:
			fmt.Fprintf(stderr, "produce: agent at %s answers again after %s\n", st.Agent, st.For.Round(time.Second))
		case st.First:
			next = 2 * time.Second
			fmt.Fprintf(stderr, "produce: agent at %s: %v; retrying, giving up in %s (--timeout)\n", st.Agent,
				cli.DialHint(errors.New(st.Cause), "agent", st.Agent, "--agent", "the agent's --ingest address"), st.GiveUpIn.Round(time.Second))
		case st.For >= next:
			next = min(2*next, st.For+30*time.Second)
			fmt.Fprintf(stderr, "produce: agent at %s still failing after %s (%s); retrying, giving up in %s (--timeout)\n",
				st.Agent, st.For.Round(time.Second), st.Cause, st.GiveUpIn.Round(time.Second))
		}
	}
}

// progressEvery is produce's --progress: a line on stderr at most once a
// second with the lines spooled so far (nil: no progress).
func progressEvery(on bool, stderr io.Writer) func(sent int) {
	if !on {
		return nil
	}
	last := time.Now()
	return func(sent int) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "produce: %s spooled\n", defaults.Plural(sent, "line"))
		}
	}
}
