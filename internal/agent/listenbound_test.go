package agent

import (
	"context"
	"net"
	"testing"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/testkit/pipelisten"
)

// Each agent listener, the ingest endpoint and the OTLP/gRPC receiver,
// takes no connection beyond defaults.IngestMaxConns open at once (the
// rest wait in the kernel's accept queue) and takes the next as soon as
// one ends. Before, both took every connection at once: clients resetting
// in a loop outran the handlers (the fault the status listener and xfer
// serve already bound).
func TestListenersBoundConnections(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), nil)
	for name, serve := range map[string]func(context.Context, net.Listener) error{
		"ingest":    a.ServeIngest,
		"OTLP/gRPC": func(ctx context.Context, lis net.Listener) error { return a.ServeOTLPGRPC(ctx, lis, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			ln := pipelisten.New()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { serve(ctx, ln); close(done) }()
			defer func() { cancel(); ln.Close(); <-done }()
			clients := make([]net.Conn, 0, defaults.IngestMaxConns)
			defer func() {
				for _, c := range clients {
					c.Close()
				}
			}()
			for range defaults.IngestMaxConns {
				clients = append(clients, ln.Dial()) // silent: each holds its slot
			}
			clients[0].Close()
			clients = append(clients[1:], ln.Dial())
			if most := ln.MostOpen(); most >= defaults.IngestMaxConns {
				t.Fatalf("asked for another connection with %d open, want fewer than %d", most, defaults.IngestMaxConns)
			}
		})
	}
}
