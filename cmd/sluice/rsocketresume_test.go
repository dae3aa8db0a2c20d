package main

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// cuttingProxy forwards TCP to upstream and cuts each of the first cuts
// connections (both sides closed) once the server has sent after bytes
// through it: a link that breaks mid-stream.
func cuttingProxy(t *testing.T, upstream string, cuts, after int) (addr string, cut *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	cut = new(atomic.Int32)
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			limit := -1
			if n.Add(1) <= int32(cuts) {
				limit = after
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(s, c); s.Close() }()
			go func() {
				defer wg.Done()
				defer c.Close()
				defer s.Close()
				buf := make([]byte, 4096)
				sent := 0
				for {
					k, err := s.Read(buf)
					if limit >= 0 && sent+k >= limit {
						c.Write(buf[:limit-sent])
						cut.Add(1)
						return
					}
					if k > 0 {
						if _, err := c.Write(buf[:k]); err != nil {
							return
						}
						sent += k
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), cut
}

// TestRSocketCLIResume: `rsocket stream --resume` against `rsocket serve
// --resume` through connections that break three times mid-stream prints
// every element once, in order; without --resume the first break ends it.
func TestRSocketCLIResume(t *testing.T) {
	tcpURL, _ := startRSocketServe(t, "--resume")
	addr, cuts := cuttingProxy(t, strings.TrimPrefix(tcpURL, "tcp://"), 3, 30_000)
	const n = 20_000
	code, out, errs := run("rsocket", "stream", "--data", strconv.Itoa(n), "--resume", "--url", "tcp://"+addr)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d elements, want %d", len(lines), n)
	}
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("element %d is %q: lost, reordered or duplicated", i, l)
		}
	}
	if got := cuts.Load(); got != 3 {
		t.Fatalf("the proxy cut %d times, want 3 (the stream must outlast the cuts)", got)
	}

	addr, _ = cuttingProxy(t, strings.TrimPrefix(tcpURL, "tcp://"), 1, 30_000)
	if code, _, _ := run("rsocket", "stream", "--data", strconv.Itoa(n), "--url", "tcp://"+addr); code == 0 {
		t.Fatal("without --resume a broken connection went unnoticed")
	}
}
