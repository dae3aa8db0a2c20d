package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicehq/sluice/client"
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
	if err := parseFlags(fs, args); err != nil {
		return err
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
	p, err := client.NewHTTPProducer("http://"+*addr, client.RetryTimeout(*timeout),
		client.ProducerID("produce-"+hex.EncodeToString(id[:])), client.OnRetryStatus(retryReporter(stderr)))
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	defer p.Close()
	start := time.Now()
	lines, err := sendLines(p, in, int(batchBytes), *addr, *progress, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "produce: %s spooled in %s\n", plural(lines, "line"), time.Since(start).Round(time.Millisecond))
	if why := p.SinkDown(); why != "" {
		fmt.Fprintf(stderr, "produce: the agent at %s is %s; the lines wait in its spool and are delivered once it reaches the sink\n", *addr, why)
	}
	return nil
}

// retryReporter says on stderr when the agent fails and when it answers
// again, counting down to --timeout, so that a retry never looks like a
// hang.
func retryReporter(stderr io.Writer) func(client.RetryStatus) {
	return func(st client.RetryStatus) {
		switch {
		case !st.Failing:
			fmt.Fprintf(stderr, "produce: agent at %s answers again after %s\n", st.Agent, st.For.Round(time.Second))
		case st.First:
			fmt.Fprintf(stderr, "produce: agent at %s: %v; retrying, giving up in %s (--timeout)\n", st.Agent,
				dialHint(errors.New(st.Cause), "agent", st.Agent, "--agent", "the agent's --ingest address"), st.GiveUpIn.Round(time.Second))
		default:
			fmt.Fprintf(stderr, "produce: agent at %s still failing after %s (%s); retrying, giving up in %s (--timeout)\n",
				st.Agent, st.For.Round(time.Second), st.Cause, st.GiveUpIn.Round(time.Second))
		}
	}
}

// sendLines sends in's lines to the agent, batchBytes per request; it
// returns how many lines it read.
func sendLines(p *client.HTTPProducer, in io.Reader, batchBytes int, addr string, progress bool, stderr io.Writer) (int, error) {
	var sent int
	post := func(body []byte) error {
		if err := p.Produce(context.Background(), splitRecords(body)...); err != nil {
			if errors.Is(err, client.ErrAgentUnavailable) {
				err = fmt.Errorf("%w (--timeout)", err)
			}
			return fmt.Errorf("after %d lines: %w", sent, dialHint(err, "agent", addr, "--agent", "the agent's --ingest address"))
		}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var buf bytes.Buffer
	var lines int
	last := time.Now()
	for sc.Scan() {
		buf.Write(sc.Bytes())
		buf.WriteByte('\n')
		lines++
		if buf.Len() >= batchBytes {
			if err := post(buf.Bytes()); err != nil {
				return lines, err
			}
			sent = lines
			buf.Reset()
		}
		if progress && time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "produce: %s spooled\n", plural(sent, "line"))
		}
	}
	if err := sc.Err(); err != nil {
		return lines, fmt.Errorf("reading input: %w", err)
	}
	if buf.Len() > 0 {
		if err := post(buf.Bytes()); err != nil {
			return lines, err
		}
	}
	return lines, nil
}

// splitRecords returns the non-empty lines of body, aliasing it. The
// agent skips empty lines; the client refuses them.
func splitRecords(body []byte) [][]byte {
	var recs [][]byte
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(line) > 0 {
			recs = append(recs, line)
		}
	}
	return recs
}
