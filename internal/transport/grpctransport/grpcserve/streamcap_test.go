package grpcserve

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/sink"
)

// TestStreamCapCountedAndLogged: a connection reaching
// --max-streams-per-conn is counted and logged at Warn, once a minute.
func TestStreamCapCountedAndLogged(t *testing.T) {
	h := newHarnessWith(t, func(c *sink.Config) { c.MaxStreamsPerConn = 4 }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caught := make(chan error, 8)
	for range 4 {
		go follow(ctx, h.cc, caught)
	}
	for range 4 {
		if err := <-caught; err != nil {
			t.Fatal(err)
		}
	}
	if n := metricValue(t, h, "sluice_sink_conn_stream_cap_total"); n != 1 {
		t.Errorf("sluice_sink_conn_stream_cap_total = %v, want 1", n)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "reached --max-streams-per-conn") || !strings.Contains(logs, "max_streams_per_conn=4") {
		t.Errorf("no Warn about the cap in the log:\n%s", logs)
	}
}

// follow reads the whole store from cc and follows it until ctx ends or
// the stream fails. caught gets nil at the first EndOfLog, or the error if
// the stream fails before it.
func follow(ctx context.Context, cc grpc.ClientConnInterface, caught chan<- error) {
	rs, err := sluicev1.NewSinkClient(cc).Read(ctx)
	if err == nil {
		err = rs.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{Follow: true}}})
	}
	if err == nil {
		err = rs.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 1 << 30}})
	}
	told := false
	for err == nil {
		var r *sluicev1.ReadResponse
		if r, err = rs.Recv(); err != nil {
			break
		}
		if r.GetEnd() != nil && !told {
			told = true
			caught <- nil
		}
	}
	if !told {
		caught <- err
	}
}
