package grpcserve

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// TestStreamCapCountedAndLogged: a connection reaching
// --max-streams-per-conn is counted and logged at Warn, once a minute.
func TestStreamCapCountedAndLogged(t *testing.T) {
	h := newHarnessWith(t, func(c *sink.Config) { c.MaxStreamsPerConn = 4 }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caught := make(chan error, 8)
	for range 4 {
		go sinkclient.Follow(ctx, h.cc, caught, nil)
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
