package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// TestRSocketServeDefaultMaxPayload: `sluice rsocket serve` with its
// default settings takes a 20 MiB request-response, which crosses as
// fragments (a frame holds at most 16 MiB), over TCP and WebSocket, and
// echoes it to a client with default settings; rsocket-py 0.4.20 sends
// the same request over TCP in 1 MiB fragments (skipped when it is not
// installed, unless SLUICE_INTEROP=require). Before, the default
// MaxPayloadSize was 16 MiB, the frame limit, and every such request got
// ERROR[INVALID] "reassembled payload exceeds 16777216 bytes"; the
// interop tests passed only because they raised the limit in code. With
// --max-payload 1MiB the same request is refused with ERROR[INVALID].
func TestRSocketServeDefaultMaxPayload(t *testing.T) {
	tcpURL, wsURL := startRSocketServe(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16)
	for _, url := range []string{tcpURL, wsURL} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := rsocket.Dial(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte("big"), Data: big})
			if err != nil {
				t.Fatalf("20 MiB request-response with the defaults: %v", err)
			}
			if !bytes.Equal(p.Data, big) || string(p.Metadata) != "big" {
				t.Fatalf("echoed %d bytes, metadata %q", len(p.Data), p.Metadata)
			}
		})
	}

	t.Run("rsocket-py", func(t *testing.T) {
		py := os.Getenv("SLUICE_RSOCKET_PY")
		if py == "" {
			home, _ := os.UserHomeDir()
			py = filepath.Join(home, ".cache", "sluice", "rsocket-py", "bin", "python")
		}
		if _, err := os.Stat(py); err != nil {
			testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop,
				fmt.Sprintf("rsocket-py not installed (%v): run interop/rsocket-py/setup.sh", err))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		host, port, _ := strings.Cut(strings.TrimPrefix(tcpURL, "tcp://"), ":")
		client := filepath.Join("..", "..", "interop", "rsocket-py", "client.py")
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, py, client, host, port, "large_20MiB")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("client.py: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
		}
		var r struct {
			Case, Detail string
			OK           bool
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil || r.Case != "large_20MiB" || !r.OK {
			t.Fatalf("rsocket-py 20 MiB request-response: %s (%v)", out, err)
		}
	})

	t.Run("max-payload 1MiB", func(t *testing.T) {
		tcpURL, _ := startRSocketServe(t, "--max-payload", "1MiB")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := rsocket.Dial(ctx, tcpURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.RequestResponse(ctx, rsocket.Payload{Data: make([]byte, 1<<20+1)})
		if err == nil || !strings.Contains(err.Error(), "INVALID") {
			t.Fatalf("1 MiB + 1 B to --max-payload 1MiB: %v, want ERROR[INVALID]", err)
		}
		if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: make([]byte, 1<<20)}); err != nil {
			t.Fatalf("1 MiB to --max-payload 1MiB: %v", err)
		}
	})
}
