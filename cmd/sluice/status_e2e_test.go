package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/status"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket"
)

// TestStatusPageOnDaemons: sink, agent and xfer serve, as processes, serve
// the status page at / of --metrics and a first snapshot of their kind on
// status.stream; the agent with --ingest-tokens wants a token; every
// metric the xfer snapshot reads is exported. (The page itself is driven
// in a browser by internal/status's TestBrowserStatusPage.)
func TestStatusPageOnDaemons(t *testing.T) {
	dir := t.TempDir()
	const token = "status-e2e-token-0123456789"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(token+" ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sinkAddr, sinkMetrics, agentMetrics, xferMetrics := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--metrics", sinkMetrics)
	start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"), "--ingest", freeAddr(t),
		"--ingest-tokens", tokens, "--metrics", agentMetrics)
	start(t, "xfer serve", "xfer", "serve", "--dir", filepath.Join(dir, "xfer"), "--grpc", freeAddr(t), "--metrics", xferMetrics)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	get := func(addr, path string) string {
		var body string
		testwait.For(t, "GET "+addr+path, func() bool {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
			return resp.StatusCode == 200
		})
		return body
	}
	first := func(addr, token string) (status.Snapshot, error) {
		c, err := rsocket.Dial(ctx, "ws://"+addr+"/rsocket")
		if err != nil {
			return status.Snapshot{}, err
		}
		defer c.Close()
		md, err := status.Metadata(status.RouteStream, token)
		if err != nil {
			return status.Snapshot{}, err
		}
		st, err := c.RequestStream(ctx, rsocket.Payload{Metadata: md}, 1)
		if err != nil {
			return status.Snapshot{}, err
		}
		p, err := st.Next()
		if err != nil {
			return status.Snapshot{}, err
		}
		var s status.Snapshot
		return s, json.Unmarshal(p.Data, &s)
	}
	for _, d := range []struct {
		kind        status.Kind
		addr, token string
	}{{status.KindSink, sinkMetrics, ""}, {status.KindAgent, agentMetrics, token}, {status.KindXfer, xferMetrics, ""}} {
		if page := get(d.addr, "/"); !strings.Contains(page, "class RSocketClient") {
			t.Errorf("%s: / is not the status page", d.kind)
		}
		s, err := first(d.addr, d.token)
		if err != nil || s.Kind != d.kind || s.Throughput == nil {
			t.Errorf("%s: first snapshot %+v, %v", d.kind, s, err)
		}
		if d.kind == status.KindXfer && (s.Xfer == nil || s.Xfer.Uploads == nil) {
			t.Errorf("xfer snapshot without uploads: %+v", s)
		}
	}
	if _, err := first(agentMetrics, "not-the-token-0123456789"); err == nil || !strings.Contains(err.Error(), "unauthorized: token not valid") {
		t.Errorf("agent with a bad token: %v", err)
	}
	metrics := get(xferMetrics, "/metrics")
	for _, m := range status.Metrics {
		if m.Kind == status.KindXfer && !strings.Contains(metrics, "\n"+m.Name+" ") {
			t.Errorf("xfer serve exports no %s (feeds %s)", m.Name, m.Field)
		}
	}
}
