package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

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
