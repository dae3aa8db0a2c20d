package grpcserve

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/metrictest"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/transport/serving"
)

// readCounter is the sink, counting the Read streams that reach it.
type readCounter struct {
	protocol.Service
	reads atomic.Int64
}

func (r *readCounter) ServeRead(c protocol.Conn) error {
	r.reads.Add(1)
	return r.Service.ServeRead(c)
}

// TestReadRefusedBeforeHandler: a Read stream over the address's
// consumer share is refused in gRPC's tap, with the sink's
// ResourceExhausted and its refusal counted, and never reaches the sink:
// gRPC starts no handler goroutine for it (issue 23 item 6, never-reads:
// 64 connections × 100 streams had the sink run thousands of handlers only
// to refuse each, a live heap of 40 MB where 13 MB is left with the tap).
func TestReadRefusedBeforeHandler(t *testing.T) {
	counter := &readCounter{}
	h := newHarnessWith(t, func(c *sink.Config) { c.MaxConsumersPerPeer = 2 },
		func(host *serving.Host) { counter.Service = host.Service; host.Service = counter })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caught := make(chan error, 2)
	for range 2 {
		go sinkclient.Follow(ctx, h.cc, caught, nil)
	}
	for range 2 {
		if err := <-caught; err != nil {
			t.Fatal(err)
		}
	}
	const over = 5
	for i := range over {
		rs, err := sluicev1.NewSinkClient(h.cc).Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rs.Recv()
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("Read stream %d over a share of 2: %v, want ResourceExhausted", i+1, err)
		}
	}
	if n := counter.reads.Load(); n != 2 {
		t.Errorf("%d Read streams reached the sink, want the 2 it serves: the %d over the share ran handlers", n, n-2)
	}
	if n := refusedValue(t, h, "consumers_per_peer"); n != over {
		t.Errorf(`sluice_sink_refused_total{reason="consumers_per_peer"} = %v, want %d`, n, over)
	}
}

// refusedValue reads sluice_sink_refused_total{reason}.
func refusedValue(t *testing.T, h *harness, reason string) float64 {
	t.Helper()
	return metrictest.Value(t, h.s.Registry(), "sluice_sink_refused_total{reason="+reason+"}")
}
