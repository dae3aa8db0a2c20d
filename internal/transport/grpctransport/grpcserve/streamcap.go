package grpcserve

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/stats"

	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/transport/serving"
)

// streamCapWatch is a gRPC stats.Handler that counts the streams open on
// each connection and tells when one reaches Config.MaxStreamsPerConn
// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). A gRPC client does not fail
// the streams it opens beyond that limit: it queues them until one ends,
// so a follower beyond the cap waits silently (issue 23: 184 of 200
// followers on one channel got nothing for 90 s and no error). The sink
// cannot see the queued streams, only that a connection is full: it counts
// that in sluice_sink_conn_stream_cap_total and logs a Warn at most once a
// minute.
type streamCapWatch struct {
	h   *serving.Host
	max int64

	mu     sync.Mutex
	warned logutil.Every
}

type connStreamsKey struct{}

// connStreams is the number of streams running on one connection.
type connStreams struct {
	n      atomic.Int64
	remote string
}

func (w *streamCapWatch) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	c := &connStreams{}
	if info.RemoteAddr != nil {
		c.remote = info.RemoteAddr.String()
	}
	return context.WithValue(ctx, connStreamsKey{}, c)
}

func (w *streamCapWatch) HandleConn(context.Context, stats.ConnStats) {}

func (w *streamCapWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}

func (w *streamCapWatch) HandleRPC(ctx context.Context, st stats.RPCStats) {
	c, _ := ctx.Value(connStreamsKey{}).(*connStreams)
	if c == nil {
		return
	}
	switch st.(type) {
	case *stats.Begin:
		if c.n.Add(1) == w.max {
			w.reached(c.remote)
		}
	case *stats.End:
		c.n.Add(-1)
	}
}

// reached counts a connection reaching the cap and warns once a minute.
func (w *streamCapWatch) reached(remote string) {
	w.h.StreamCapReached.Inc()
	w.mu.Lock()
	warn := w.warned.Due(time.Now(), time.Minute)
	w.mu.Unlock()
	if warn {
		w.h.Logger.Warn("sink: a connection reached --max-streams-per-conn; its client queues further streams "+
			"(a consumer beyond it waits without an error until another stream of the connection ends) (logged once a minute)",
			"peer", remote, "max_streams_per_conn", w.max)
	}
}
