package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rsocketd"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// lengthPrefixed length-prefixes one encoded frame.
func lengthPrefixed(f []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	out, err := frame.AppendLengthPrefix(nil, len(f))
	if err != nil {
		panic(err)
	}
	return append(out, f...)
}

// TestRSocketServeOutboundFlags: `rsocket serve --outbound-budget 64KiB
// --write-timeout 200ms` drops a client that floods KEEPALIVE(R) frames
// and never reads the echoes, and refuses a budget of 0.
func TestRSocketServeOutboundFlags(t *testing.T) {
	if code, _, errs := run("rsocket", "serve", "--listen", "tcp://127.0.0.1:0", "--outbound-budget", "0"); code != 2 || !strings.Contains(errs, "--outbound-budget") {
		t.Fatalf("--outbound-budget 0: exit %d, stderr %q; want 2 and the reason", code, errs)
	}
	tcpURL, _ := startRSocketServe(t, "--outbound-budget", "64KiB", "--write-timeout", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := net.Dial("tcp", strings.TrimPrefix(tcpURL, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	setup := lengthPrefixed(frame.AppendSetup(nil, frame.Setup{MajorVersion: frame.ProtocolMajor, MinorVersion: frame.ProtocolMinor,
		KeepaliveInterval: 30000, MaxLifetime: 60000, MetadataMIME: []byte("application/octet-stream"), DataMIME: []byte("application/octet-stream")}))
	ka := lengthPrefixed(frame.AppendKeepalive(nil, true, 0, make([]byte, 256<<10)))
	done := make(chan error, 1)
	go func() {
		if _, err := raw.Write(setup); err != nil {
			done <- err
			return
		}
		for range 4096 { // 1 GiB: far beyond the socket buffers
			if _, err := raw.Write(ka); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the server read 1 GiB of KEEPALIVEs whose echoes nobody read")
		}
	case <-ctx.Done():
		t.Fatal("the server neither dropped the client nor read on")
	}
}

// TestRSocketServeMemoryLimitFlag: --memory-limit takes auto, 0 or a size
// as the other size flags do; auto derives the limit from the listeners'
// server budgets (plus the resume buffers) unless GOMEMLIMIT is set, 0
// sets none, a size sets that; a bad value is a usage error; and serve
// runs with each.
func TestRSocketServeMemoryLimitFlag(t *testing.T) {
	for _, c := range []struct {
		arg       string
		envSet    bool
		want      int64
		wantLimit bool
	}{
		{"", false, 2*(256<<20) + 64<<20 + rsocketd.AutoMemoryHeadroom, true},
		{"auto", false, 2*(256<<20) + 64<<20 + rsocketd.AutoMemoryHeadroom, true},
		{"", true, 0, false},
		{"0", false, 0, false},
		{"0", true, 0, false},
		{"512MiB", false, 512 << 20, true},
		{"1GB", true, 1e9, true},
	} {
		var m rsocketd.MemoryLimit
		if c.arg != "" {
			if err := m.Set(c.arg); err != nil {
				t.Fatalf("Set(%q): %v", c.arg, err)
			}
		}
		got, ok := m.Limit(c.envSet, 2, 256<<20, 64<<20)
		if got != c.want || ok != c.wantLimit {
			t.Errorf("--memory-limit %q, GOMEMLIMIT set %v: limit %d, %v; want %d, %v", c.arg, c.envSet, got, ok, c.want, c.wantLimit)
		}
	}
	var m rsocketd.MemoryLimit
	if m.String() != "auto" {
		t.Errorf("the default prints as %q, want auto", m.String())
	}
	if err := m.Set("512MiB"); err != nil || m.String() != "512MiB" {
		t.Errorf("512MiB prints back as %q (%v)", m.String(), err)
	}
	if code, _, errs := run("rsocket", "serve", "--listen", "tcp://127.0.0.1:0", "--memory-limit", "lots"); code != 2 || !strings.Contains(errs, "memory-limit") {
		t.Fatalf("--memory-limit lots: exit %d, stderr %q; want 2 and the flag named", code, errs)
	}
	for _, arg := range []string{"auto", "0", "512MiB"} {
		u, _ := startRSocketServe(t, "--memory-limit", arg)
		if u == "" {
			t.Fatalf("--memory-limit %s: serve did not listen", arg)
		}
	}
}
