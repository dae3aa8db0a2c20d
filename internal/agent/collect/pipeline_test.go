package collect_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// pipeline is an agent delivering to a sink, both in this process, with
// the agent's ingest listener (HTTP) and OTLP/gRPC listener on loopback:
// what a collector pointed at an agent meets.
type pipeline struct {
	agent    *agent.Agent
	sink     *sinktest.Sink
	httpAddr string
	grpcAddr string
	// seen is how many records the sink had acknowledged when the store
	// was last read: waitFor reads it again only when there are more.
	seen uint64
}

func startPipeline(t *testing.T) *pipeline {
	t.Helper()
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	a, err := agent.New(agent.Config{SinkAddr: ts.Addr, SpoolDir: filepath.Join(dir, "spool"),
		Logger: slog.New(slog.DiscardHandler), ReconnectMin: 10 * time.Millisecond, ReconnectMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	httpLis := listen(t)
	grpcLis := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 2)
	go func() { served <- a.ServeIngest(ctx, httpLis) }()
	go func() { served <- a.ServeOTLPGRPC(ctx, grpcLis, nil) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-served; err != nil {
				t.Errorf("serving: %v", err)
			}
		}
		a.Close()
	})
	return &pipeline{agent: a, sink: ts, httpAddr: httpLis.Addr().String(), grpcAddr: grpcLis.Addr().String()}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

// marked is one telemetry record read back from the sink's store.
type marked struct {
	kind telemetry.Kind
	body []byte
	// storedAs is the kind in the stored record: RemoteWriteColumns for
	// a remote-write request in the columnar encoding.
	storedAs telemetry.Kind
}

// waitFor waits until found holds for what the sink has stored, reading
// the store (through a Read session, as a consumer does) each time the
// agent has had more records acknowledged.
func (p *pipeline) waitFor(t *testing.T, what string, found func([]marked) bool) {
	t.Helper()
	testwait.For(t, what, func() bool {
		acked := p.agent.Progress().AckedRecords
		if acked == p.seen {
			return false
		}
		p.seen = acked
		return found(storedTelemetry(t, p.sink.Addr))
	})
}

// storedTelemetry reads every marked record in the sink's store.
func storedTelemetry(t *testing.T, addr string) []marked {
	t.Helper()
	var out []marked
	for _, r := range sinktest.StoredRecords(t, addr) {
		k, body, err := telemetry.Decode(r)
		if errors.Is(err, telemetry.ErrNotMarked) {
			continue
		}
		if err != nil {
			t.Fatalf("stored record: %v", err)
		}
		out = append(out, marked{k, body, telemetry.Kind(r[len(telemetry.Magic)+1])})
	}
	return out
}

// seriesLabels returns the label sets of a WriteRequest's time series
// (remote-write's field numbers: WriteRequest.timeseries = 1,
// TimeSeries.labels = 1, Label.name = 1, Label.value = 2).
func seriesLabels(t *testing.T, wr []byte) []map[string]string {
	t.Helper()
	var out []map[string]string
	fields(t, wr, func(num protowire.Number, ts []byte) {
		if num != 1 {
			return
		}
		labels := map[string]string{}
		fields(t, ts, func(num protowire.Number, l []byte) {
			if num != 1 {
				return
			}
			var name, value string
			fields(t, l, func(num protowire.Number, v []byte) {
				switch num {
				case 1:
					name = string(v)
				case 2:
					value = string(v)
				}
			})
			labels[name] = value
		})
		out = append(out, labels)
	})
	return out
}

// fields calls f with each bytes-typed field of the message b.
func fields(t *testing.T, b []byte, f func(protowire.Number, []byte)) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad protobuf: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				t.Fatalf("bad protobuf: %v", protowire.ParseError(m))
			}
			f(num, v)
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatalf("bad protobuf: %v", protowire.ParseError(m))
		}
		b = b[m:]
	}
}
