package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests drive real sluice processes through the faults of the
// "harden the delivery foundation" issue: an unreachable agent, a sink
// restarted under a following consumer, a frozen sink, and connection
// resets plus SIGKILLs together. They wait on conditions with generous
// overall timeouts and never assert on how long anything took.

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines counts complete lines written so far.
func (l *lockedBuffer) lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Count(l.b.Bytes(), []byte{'\n'})
}

// bg is a sluice process whose output the test reads while it runs.
type bg struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan error
}

func startBG(t *testing.T, stdin io.Reader, args ...string) *bg {
	t.Helper()
	p := &bg{cmd: exec.Command(sluiceBin, args...), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = stdin, p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		p.done <- nil
	})
	return p
}

// wait returns the process's exit error, failing the test if it runs on
// past timeout.
func (p *bg) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		t.Fatalf("%v still running\nstderr:\n%s", p.cmd.Args, p.stderr)
		return nil
	}
}

// chaosProxy forwards TCP connections to a target and can break them the
// ways a network does: reset every connection (RST both ways), or freeze
// (stop forwarding in both directions, keep every connection open and
// accept new ones without forwarding them), as a stuck middlebox or a
// stopped process looks from outside.
type chaosProxy struct {
	t      *testing.T
	target string
	lis    net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]bool
	frozen bool
	thaw   chan struct{} // closed when the proxy unfreezes
}

func newChaosProxy(t *testing.T, target string) *chaosProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &chaosProxy{t: t, target: target, lis: lis, conns: map[net.Conn]bool{}, thaw: make(chan struct{})}
	close(p.thaw)
	go p.accept()
	t.Cleanup(func() { lis.Close(); p.reset() })
	return p
}

func (p *chaosProxy) addr() string { return p.lis.Addr().String() }

func (p *chaosProxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *chaosProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = true
	p.mu.Unlock()
}

func (p *chaosProxy) serve(c net.Conn) {
	p.track(c)
	p.gate()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		abort(c)
		return
	}
	p.track(s)
	go p.pipe(s, c)
	p.pipe(c, s)
}

// gate blocks while the proxy is frozen.
func (p *chaosProxy) gate() {
	p.mu.Lock()
	thaw := p.thaw
	p.mu.Unlock()
	<-thaw
}

// pipe copies src to dst, holding each chunk at the gate, so a freeze
// stops the stream mid-flight and TCP back-pressure does the rest.
func (p *chaosProxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				abort(src)
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && err == io.EOF {
				tc.CloseWrite()
				return
			}
			abort(dst)
			return
		}
	}
}

// abort closes c with an RST.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// reset sends an RST on every connection, both sides.
func (p *chaosProxy) reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
		abort(c)
	}
}

func (p *chaosProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.frozen, p.thaw = true, make(chan struct{})
	}
}

func (p *chaosProxy) unfreeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen {
		p.frozen = false
		close(p.thaw)
	}
}

// writeInput writes n distinct records to a file and returns them.
func writeInput(t *testing.T, path string, n int, tag string) []string {
	t.Helper()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var want []string
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("%s-%06d mem_bytes{host=\"h%d\"} %d", tag, i, rng.Intn(500), rng.Int63())
		want = append(want, line)
		buf.WriteString(line + "\n")
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return want
}

// consumeAll prints a sink's store (nil if the sink cannot be read now).
func consumeAll(sinkAddr string) []string {
	out, err := exec.Command(sluiceBin, "consume", "--sink", sinkAddr).Output()
	if err != nil {
		return nil
	}
	s := strings.TrimSuffix(string(out), "\n")
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "\n")
}

// exactMultiset fails unless got and want hold the same lines, each as
// many times.
func exactMultiset(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := append([]string(nil), got...), append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	count := func(xs []string) map[string]int {
		m := map[string]int{}
		for _, x := range xs {
			m[x]++
		}
		return m
	}
	gc, wc := count(g), count(w)
	var lost, dup int
	for x, n := range wc {
		if gc[x] < n {
			lost += n - gc[x]
		}
	}
	for x, n := range gc {
		if n > wc[x] {
			dup += n - wc[x]
		}
	}
	if lost != 0 || dup != 0 {
		t.Fatalf("%s: %d records, want %d: %d lost, %d duplicated or unexpected", what, len(got), len(want), lost, dup)
	}
}

// TestProduceReportsUnreachableAgent: produce says on stderr that it
// cannot reach the agent, keeps retrying with a countdown, and delivers
// once the agent is up; with --timeout it gives up and says why. Before,
// it retried silently for 10 minutes.
func TestProduceReportsUnreachableAgent(t *testing.T) {
	dir := t.TempDir()
	want := writeInput(t, filepath.Join(dir, "in.txt"), 1000, "late")
	sinkAddr, ingestAddr := freeAddr(t), freeAddr(t)
	p := startBG(t, nil, "produce", "--agent", ingestAddr, "--file", filepath.Join(dir, "in.txt"))
	waitFor(t, "produce to report the unreachable agent", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "cannot reach it")
	})
	waitFor(t, "a countdown line", 30*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "giving up in")
	})
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"))
	start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"), "--ingest", ingestAddr)
	if err := p.wait(t, 60*time.Second); err != nil {
		t.Fatalf("produce: %v\n%s", err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "answers again") {
		t.Errorf("produce did not say the agent came back:\n%s", p.stderr)
	}
	var got []string
	waitFor(t, "the records in the store", 60*time.Second, func() bool {
		got = consumeAll(sinkAddr)
		return len(got) >= len(want)
	})
	exactMultiset(t, "store", got, want)

	// --timeout: fail, naming the cause, instead of waiting.
	q := startBG(t, strings.NewReader("x\n"), "produce", "--agent", freeAddr(t), "--timeout", "1s")
	if err := q.wait(t, 60*time.Second); err == nil {
		t.Fatalf("produce to nothing with --timeout 1s succeeded:\n%s", q.stderr)
	}
	if s := q.stderr.String(); !strings.Contains(s, "--timeout") || !strings.Contains(s, "connection refused") {
		t.Fatalf("produce --timeout did not name the cause:\n%s", s)
	}

	// An agent that accepts connections and never answers is reported too.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r := startBG(t, strings.NewReader("x\n"), "produce", "--agent", lis.Addr().String(), "--timeout", "30s")
	waitFor(t, "produce to report the silent agent", 30*time.Second, func() bool {
		return strings.Contains(r.stderr.String(), "no answer")
	})
}

// TestConsumeFollowSurvivesSinkRestart: a following consumer outlives a
// SIGKILLed and restarted sink, resumes after the last record it printed,
// and prints every record exactly once. Before, it exited on the first
// broken stream.
func TestConsumeFollowSurvivesSinkRestart(t *testing.T) {
	for _, group := range []string{"", "g1"} {
		t.Run("group="+group, func(t *testing.T) {
			dir := t.TempDir()
			sinkAddr, ingestAddr := freeAddr(t), freeAddr(t)
			sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"))
			start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"), "--ingest", ingestAddr,
				"--max-message", "4KiB", "--reconnect-max", "200ms")
			produce := func(tag string, n int) []string {
				file := filepath.Join(dir, tag+".txt")
				recs := writeInput(t, file, n, tag)
				if out, err := exec.Command(sluiceBin, "produce", "--agent", ingestAddr, "--file", file, "--batch-bytes", "8KiB").CombinedOutput(); err != nil {
					t.Fatalf("produce: %v\n%s", err, out)
				}
				return recs
			}
			want := produce("before", 3000)
			args := []string{"consume", "--sink", sinkAddr, "--follow", "--credits", "8"}
			if group != "" {
				args = append(args, "--group", group)
			}
			c := startBG(t, nil, args...)
			waitFor(t, "the first records printed", 60*time.Second, func() bool { return c.stdout.lines() >= 3000 })
			sink.restart()
			// Delivered while the consumer is cut off, and after it is back.
			want = append(want, produce("during", 3000)...)
			waitFor(t, "the consumer to reconnect", 60*time.Second, func() bool { return c.stdout.lines() >= 6000 })
			want = append(want, produce("after", 1000)...)
			waitFor(t, "every record printed", 60*time.Second, func() bool { return c.stdout.lines() >= len(want) })
			select {
			case err := <-c.done:
				c.done <- err
				t.Fatalf("consume --follow exited: %v\n%s", err, c.stderr)
			default:
			}
			c.cmd.Process.Signal(syscall.SIGINT)
			c.wait(t, 60*time.Second)
			got := strings.Split(strings.TrimSuffix(c.stdout.String(), "\n"), "\n")
			exactMultiset(t, "consumer output", got, want)
			if !strings.Contains(c.stderr.String(), "reconnecting") {
				t.Errorf("consume did not report the reconnect:\n%s", c.stderr)
			}
		})
	}
}
