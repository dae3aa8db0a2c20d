package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/status"
)

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// newRegistry returns a registry with the Go runtime and process
// collectors and sluice_build_info. The runtime's memory classes
// (go_memory_classes_*_bytes: heap objects, free, released, stacks, GC
// metadata, other) are exported so that what a daemon keeps after a burst
// can be told apart from outside (docs/reliability.md, "Hostile clients
// on every listener").
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsMemory)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	return reg
}

// serveMetrics serves /metrics, /healthz and /readyz on addr until ctx
// ends. An empty addr serves nothing. /healthz answers 200 while the
// process serves HTTP and healthy (nil: always) returns nil, and 503 with
// the reason when only a restart helps; /readyz answers 200 when ready
// returns nil and 503 with the reason otherwise (a nil ready is always
// ready).
// With a status config, it also serves the status page at / and its
// RSocket API at /rsocket (internal/status); the config's Gatherer, Ready
// and Log default to reg, ready and log.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, log *slog.Logger, ready, healthy func() error, page ...status.Config) error {
	if addr == "" {
		return nil
	}
	lis, err := cli.ListenFlag("--metrics", addr)
	if err != nil {
		return err
	}
	serveMetricsOn(ctx, lis, reg, log, ready, healthy, page...)
	return nil
}

// serveMetricsOn is serveMetrics on a bound listener (nil: none).
func serveMetricsOn(ctx context.Context, lis net.Listener, reg *prometheus.Registry, log *slog.Logger, ready, healthy func() error, page ...status.Config) {
	status.Serve(ctx, lis, reg, log, ready, healthy, page...)
}
