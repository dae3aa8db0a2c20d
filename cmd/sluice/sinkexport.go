package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/export"
	"github.com/sluicehq/sluice/internal/sink"
)

// exporters are the sink's running --export exporters.
type exporters struct {
	list   []*export.Exporter
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startExporters starts one exporter per target over s's store; each
// runs until stop.
func startExporters(s *sink.Sink, targets []export.Target, reg prometheus.Registerer, log *slog.Logger) *exporters {
	ctx, cancel := context.WithCancel(context.Background())
	x := &exporters{cancel: cancel}
	if len(targets) == 0 {
		return x
	}
	m := export.NewMetrics(reg)
	for _, t := range targets {
		e := export.New(export.Config{Target: t, Reader: s.Reader(), Decoder: s.NewBodyDecoder(), Metrics: m, Logger: log})
		x.list = append(x.list, e)
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			e.Run(ctx)
		}()
	}
	return x
}

// status lists the exporters' states for the status page.
func (x *exporters) status() []export.Status {
	out := make([]export.Status, len(x.list))
	for i, e := range x.list {
		out[i] = e.Status()
	}
	return out
}

// stop ends the exporters, each after committing what it went past; the
// sink's store must still be open.
func (x *exporters) stop() {
	x.cancel()
	x.wg.Wait()
}
