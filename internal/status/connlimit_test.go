package status

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testkit/pipelisten"
)

// TestServeBoundsConnections: the metrics and status listener takes no
// connection beyond MaxConns open at once (the rest wait in the kernel's
// accept queue), and takes the next as soon as one ends. Before, it took
// every one at once: 100 clients resetting mid-request in a loop had
// thousands open, and the Go runtime keeps what such a peak grew
// (docs/reliability.md, "Hostile clients on every listener").
func TestServeBoundsConnections(t *testing.T) {
	ln := pipelisten.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Serve(ctx, ln, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), nil, nil)
	clients := make([]net.Conn, 0, MaxConns)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range MaxConns {
		clients = append(clients, ln.Dial()) // silent: each holds its slot
	}
	// One goes: the server ends it and takes the next.
	clients[0].Close()
	clients = append(clients[1:], ln.Dial())
	if most := ln.MostOpen(); most >= MaxConns {
		t.Fatalf("the server asked for another connection with %d open, want fewer than %d", most, MaxConns)
	}
}
