package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strconv"

	"fmt"
	"github.com/sluicehq/sluice/internal/agent"
	"io"
	"net/http"
	"os"
	"time"
)

func runProduce(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("produce", "--agent HOST:PORT [--file F]", stderr)
	addr := fs.String("agent", "127.0.0.1:7401", "the agent's ingest address")
	file := fs.String("file", "", "read lines from this file instead of stdin")
	batchBytes := byteSize(1 << 20)
	fs.Var(&batchBytes, "batch-bytes", "lines per HTTP request, in bytes")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up when the agent has refused (spool full, down) this long")
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
	p := &producer{url: "http://" + *addr + "/v1/records", client: &http.Client{Timeout: 2 * time.Minute},
		timeout: *timeout, id: "produce-" + hex.EncodeToString(id[:])}
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
	url     string
	client  *http.Client
	timeout time.Duration
	id      string
	seq     uint64
}

func (p *producer) post(body []byte) error {
	p.seq++
	backoff := 50 * time.Millisecond
	deadline := time.Now().Add(p.timeout)
	for {
		req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set(agent.HeaderProducer, p.id)
		req.Header.Set(agent.HeaderSequence, strconv.FormatUint(p.seq, 10))
		resp, err := p.client.Do(req)
		var status int
		var msg []byte
		if err == nil {
			status = resp.StatusCode
			msg, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if status == http.StatusOK {
				return nil
			}
			// A full spool or a restarting agent clears up by itself;
			// anything else is the input's fault and retrying won't help.
			if status != http.StatusInsufficientStorage && status != http.StatusServiceUnavailable {
				return fmt.Errorf("agent answered %d: %s", status, bytes.TrimSpace(msg))
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("agent unreachable for %s: %w", p.timeout, err)
			}
			return fmt.Errorf("agent refused for %s: %d %s", p.timeout, status, bytes.TrimSpace(msg))
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}
