package export

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/store"
)

// Source is what a group of exporters reads: the sink's embedded store
// and, for each exporter, a decoder of its message bodies (each exporter
// decompresses alone).
type Source interface {
	Reader() store.Reader
	NewBodyDecoder() *store.BodyDecoder
}

// Group is the sink's running --export exporters, one per target.
type Group struct {
	list   []*Exporter
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// StartGroup starts one exporter per target over src's store; each runs
// until Stop. With no targets it starts nothing (and registers no
// metrics).
func StartGroup(src Source, targets []Target, reg prometheus.Registerer, log *slog.Logger) *Group {
	ctx, cancel := context.WithCancel(context.Background())
	g := &Group{cancel: cancel}
	if len(targets) == 0 {
		return g
	}
	m := NewMetrics(reg)
	for _, t := range targets {
		e := New(Config{Target: t, Reader: src.Reader(), Decoder: src.NewBodyDecoder(), Metrics: m, Logger: log})
		g.list = append(g.list, e)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			e.Run(ctx)
		}()
	}
	return g
}

// Status lists the exporters' states for the status page.
func (g *Group) Status() []Status {
	out := make([]Status, len(g.list))
	for i, e := range g.list {
		out[i] = e.Status()
	}
	return out
}

// Stop ends the exporters, each after committing what it went past; the
// store they read must still be open.
func (g *Group) Stop() {
	g.cancel()
	g.wg.Wait()
}
