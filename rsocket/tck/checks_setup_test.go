package tck

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// laxServer is a raw TCP server that behaves as sluice did before issue
// 22: a SETUP with L is refused with REJECTED_SETUP unless withLease, any
// 1.x version is accepted, a RESUME on an established connection is
// ignored, and a resumed session gets RESUME_OK but no LEASE. It echoes
// KEEPALIVE with R, so a connection that goes on can be told from one that
// ended.
func laxServer(t *testing.T, withLease bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go laxConn(c, withLease)
		}
	}()
	return "tcp://" + ln.Addr().String()
}

func laxConn(c net.Conn, withLease bool) {
	defer c.Close()
	write := func(f []byte) {
		n := len(f)
		_, _ = c.Write(append([]byte{byte(n >> 16), byte(n >> 8), byte(n)}, f...))
	}
	first := true
	for {
		var p [3]byte
		if _, err := io.ReadFull(c, p[:]); err != nil {
			return
		}
		f := make([]byte, int(p[0])<<16|int(p[1])<<8|int(p[2]))
		if _, err := io.ReadFull(c, f); err != nil {
			return
		}
		h, _ := frame.ParseHeader(f)
		switch {
		case first && h.Type == frame.TypeSetup:
			s, _ := frame.ParseSetup(f)
			if s.Lease() && !withLease {
				write(must(frame.AppendError(nil, 0, frame.ErrorCodeRejectedSetup, "lease is not enabled on this server")))
				return
			}
			if s.Lease() {
				write(must(frame.AppendLease(nil, 10_000, 5, nil)))
			}
		case first && h.Type == frame.TypeResume:
			write(must(frame.AppendResumeOK(nil, 0))) // and no LEASE
		case h.Type == frame.TypeKeepalive && h.Has(frame.FlagRespond):
			k, _ := frame.ParseKeepalive(f)
			write(must(frame.AppendKeepalive(nil, false, 0, k.Data)))
		}
		first = false
	}
}

// TestRunnerCatchesLaxSetupAndResume: the checks of issue 22 fail (MUSTs)
// or warn (SHOULDs, and accepting SETUP 1.1) against a server that
// behaves as sluice did before it.
func TestRunnerCatchesLaxSetupAndResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		lease bool
		want  map[string]Status
	}{
		{false, map[string]Status{"setup-lease-refused": Fail, "setup-minor-version": Warn, "resume-after-setup": Warn, "lease-after-resume": Skip}},
		{true, map[string]Status{"setup-lease-refused": Skip, "lease-after-resume": Fail}},
	} {
		var only []string
		for id := range tc.want {
			only = append(only, id)
		}
		rep := Run(ctx, Config{URL: laxServer(t, tc.lease), Timeout: 3 * time.Second, Quiet: 50 * time.Millisecond, Only: only})
		if len(rep.Results) != len(only) {
			t.Fatalf("lease %v: %d results for %d checks", tc.lease, len(rep.Results), len(only))
		}
		for _, r := range rep.Results {
			if want, ok := tc.want[r.ID]; ok && r.Status != want {
				t.Errorf("lease %v: %s: %s (%s), want %s", tc.lease, r.ID, r.Status, r.Detail, want)
			}
		}
	}
}
