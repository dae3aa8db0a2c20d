package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
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
	if *timeout <= 0 {
		return &exitError{code: 2, msg: "--timeout must be positive"}
	}
	p := &producer{addr: *addr, url: "http://" + *addr + "/v1/records", client: &http.Client{},
		timeout: *timeout, id: "produce-" + hex.EncodeToString(id[:]), stderr: stderr}
	stopStatus := p.statusLoop()
	defer stopStatus()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var buf bytes.Buffer
	var lines, sent int
	start, last := time.Now(), time.Now()
	for sc.Scan() {
		buf.Write(sc.Bytes())
		buf.WriteByte('\n')
		lines++
		if buf.Len() >= int(batchBytes) {
			if err := p.post(buf.Bytes()); err != nil {
				return fmt.Errorf("after %d lines: %w", sent, err)
			}
			sent = lines
			buf.Reset()
		}
		if *progress && time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "produce: %d lines spooled\n", sent)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading input: %w", err)
	}
	if buf.Len() > 0 {
		if err := p.post(buf.Bytes()); err != nil {
			return fmt.Errorf("after %d lines: %w", sent, err)
		}
	}
	fmt.Fprintf(stderr, "produce: %d lines spooled in %s\n", lines, time.Since(start).Round(time.Millisecond))
	return nil
}

// producer posts batches to the agent, retrying while the agent is busy or
// unreachable. Every batch carries the producer id and its sequence number,
// so a retry of a batch the agent spooled before crashing is not spooled
// twice.
type producer struct {
	addr, url string
	client    *http.Client
	timeout   time.Duration
	id        string
	seq       uint64
	stderr    io.Writer

	// What the status loop reports: since when the agent has been failing
	// (zero: it is not) and why, when the current request started, and
	// when the current batch gives up.
	mu                     sync.Mutex
	troubleSince, reqStart time.Time
	cause                  string
	deadline               time.Time
}

// requestTimeout bounds one request to a healthy agent: ingest answers
// once the records are fsynced, which takes milliseconds, or at worst
// seconds under a full pipeline.
const requestTimeout = 2 * time.Minute

// statusInterval is how often produce says on stderr that the agent is
// still unreachable or silent, with the time left before it gives up.
const statusInterval = 2 * time.Second

// statusLoop prints, every statusInterval while the agent fails or a
// request goes unanswered, how long it has been and when produce gives up,
// so an unreachable agent never looks like a hang.
func (p *producer) statusLoop() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(statusInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				p.mu.Lock()
				since, cause, left := p.troubleSince, p.cause, p.deadline.Sub(now).Round(time.Second)
				if since.IsZero() && !p.reqStart.IsZero() && now.Sub(p.reqStart) >= statusInterval {
					since, cause = p.reqStart, "no answer"
				}
				p.mu.Unlock()
				if !since.IsZero() {
					fmt.Fprintf(p.stderr, "produce: agent at %s still failing after %s (%s); retrying, giving up in %s (--timeout)\n",
						p.addr, now.Sub(since).Round(time.Second), cause, max(left, 0))
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (p *producer) post(body []byte) error {
	p.seq++
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(p.timeout)
	p.mu.Lock()
	p.deadline = deadline
	p.mu.Unlock()
	for {
		status, msg, err := p.postOnce(body, deadline)
		if err == nil && status == http.StatusOK {
			p.recovered()
			return nil
		}
		// A full spool or a restarting agent clears up by itself;
		// anything else is the input's fault and retrying won't help.
		if err == nil && status != http.StatusInsufficientStorage && status != http.StatusServiceUnavailable {
			return fmt.Errorf("agent answered %d: %s", status, msg)
		}
		cause := fmt.Sprintf("answered %d %s", status, msg)
		if err != nil {
			cause = "cannot reach it: " + err.Error()
		}
		last := p.trouble(cause, deadline)
		if time.Now().After(deadline) {
			return fmt.Errorf("agent at %s failing for %s (--timeout): %s", p.addr, p.timeout, last)
		}
		time.Sleep(min(backoff, max(time.Until(deadline), time.Millisecond)))
		backoff = min(2*backoff, 2*time.Second)
	}
}

// postOnce sends one request, bounded by the time left before deadline.
func (p *producer) postOnce(body []byte, deadline time.Time) (status int, msg []byte, err error) {
	d := time.Now().Add(requestTimeout)
	if deadline.Before(d) {
		d = deadline
	}
	ctx, cancel := context.WithDeadline(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set(agent.HeaderProducer, p.id)
	req.Header.Set(agent.HeaderSequence, strconv.FormatUint(p.seq, 10))
	p.mu.Lock()
	p.reqStart = time.Now()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.reqStart = time.Time{}
		p.mu.Unlock()
	}()
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	msg, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, bytes.TrimSpace(msg), nil
}

// trouble records a failed attempt; the first of a streak is reported at
// once, the rest by the status loop.
// It returns the most telling cause: a request cut short by the deadline
// keeps the error seen before it.
func (p *producer) trouble(cause string, deadline time.Time) string {
	p.mu.Lock()
	first := p.troubleSince.IsZero()
	if first {
		p.troubleSince = time.Now()
	}
	if p.cause == "" || !strings.Contains(cause, context.DeadlineExceeded.Error()) {
		p.cause = cause
	}
	cause = p.cause
	p.mu.Unlock()
	if first {
		fmt.Fprintf(p.stderr, "produce: agent at %s: %s; retrying, giving up in %s (--timeout)\n",
			p.addr, cause, max(time.Until(deadline), 0).Round(time.Second))
	}
	return cause
}

func (p *producer) recovered() {
	p.mu.Lock()
	since := p.troubleSince
	p.troubleSince, p.cause = time.Time{}, ""
	p.mu.Unlock()
	if !since.IsZero() {
		fmt.Fprintf(p.stderr, "produce: agent at %s answers again after %s\n", p.addr, time.Since(since).Round(time.Second))
	}
}
