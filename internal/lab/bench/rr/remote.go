package rr

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The split-process protocol, spoken by `sluice bench rr-server` and by
// interop/rsocket-go/cmd/rrpeer: the server prints "addr ADDR" once it
// listens, then answers each "cpu" line on stdin with "cpu MICROSECONDS"
// (its user+system time so far) and exits at EOF on stdin.

// ProcessCPU is this process's user+system CPU time.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ServeStdio is the server half of the protocol for a server already
// listening on addr; it returns at EOF on in.
func ServeStdio(addr string, in io.Reader, out io.Writer) error {
	if _, err := fmt.Fprintf(out, "addr %s\n", addr); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch strings.TrimSpace(sc.Text()) {
		case "cpu":
			if _, err := fmt.Fprintf(out, "cpu %d\n", ProcessCPU().Microseconds()); err != nil {
				return err
			}
		case "":
		default:
			fmt.Fprintf(out, "error unknown command %q\n", sc.Text())
		}
	}
	return sc.Err()
}

// Remote is a server process driven by the protocol above.
type Remote struct {
	Addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	lines *bufio.Scanner
}

// StartRemote starts cmd and waits (up to timeout) for its address.
func StartRemote(cmd *exec.Cmd, timeout time.Duration) (*Remote, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &Remote{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	line, err := r.readLine(timeout)
	if err != nil || !strings.HasPrefix(line, "addr ") {
		r.Close()
		if err == nil {
			err = fmt.Errorf("unexpected first line %q", line)
		}
		return nil, fmt.Errorf("server %s: %w", cmd.Path, err)
	}
	r.Addr = strings.TrimPrefix(line, "addr ")
	return r, nil
}

func (r *Remote) readLine(timeout time.Duration) (string, error) {
	got := make(chan string, 1)
	go func() {
		if r.lines.Scan() {
			got <- r.lines.Text()
			return
		}
		close(got)
	}()
	select {
	case l, ok := <-got:
		if !ok {
			return "", errors.New("server closed its output")
		}
		return l, nil
	case <-time.After(timeout):
		return "", errors.New("server did not answer in time")
	}
}

// CPU asks the server for its CPU time so far.
func (r *Remote) CPU(ctx context.Context) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := io.WriteString(r.stdin, "cpu\n"); err != nil {
		return 0, err
	}
	line, err := r.readLine(10 * time.Second)
	if err != nil {
		return 0, err
	}
	us, err := strconv.ParseInt(strings.TrimPrefix(line, "cpu "), 10, 64)
	if err != nil || !strings.HasPrefix(line, "cpu ") {
		return 0, fmt.Errorf("bad cpu line %q", line)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Close ends the server (EOF on its stdin, then a kill after a grace).
func (r *Remote) Close() error {
	r.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		return <-done
	}
}
