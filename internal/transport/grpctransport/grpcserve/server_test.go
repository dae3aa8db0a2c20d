package grpcserve

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/sink"
)

// TestServerKeepalive: the sink detects a half-open agent within 40 s
// (ping after 30 s of silence, 10 s to answer), and lets agents ping every
// 10 s, gRPC's shortest client keepalive, without being cut for
// too_many_pings: the enforcement minimum must be well below it.
func TestServerKeepalive(t *testing.T) {
	const agentPing = 10 * time.Second
	if ka, to := defaults.SinkKeepaliveTime, defaults.SinkKeepaliveTimeout; ka == 0 || ka > 30*time.Second || to == 0 || to > 10*time.Second {
		t.Errorf("server keepalive time %v, timeout %v: want time in (0, 30s] and timeout in (0, 10s]", ka, to)
	}
	if p := serverKeepalivePolicy; p.MinTime > agentPing/2 || !p.PermitWithoutStream {
		t.Errorf("enforcement policy %+v: want MinTime <= %v and PermitWithoutStream", p, agentPing/2)
	}
}

// TestRequestSizeLimit: a Request larger than the largest a well-behaved
// agent sends (max message plus framing) ends the stream before it is
// buffered whole.
func TestRequestSizeLimit(t *testing.T) {
	const maxMsg = 64 << 10
	h := newHarnessWith(t, func(c *sink.Config) { c.MaxMessageBytes = maxMsg }, nil)
	a := h.connect("edge-1")
	limit := maxRequestBytes(maxMsg)
	a.Send(&sluicev1.Request{Version: 1, MessageId: 1, RecordCount: 1,
		Payload: &sluicev1.Request_Plain{Plain: make([]byte, limit+1)}})
	if err := a.Status(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Request of %d bytes: %v, want ResourceExhausted", limit+1, err)
	}
	if limit > 2<<20 {
		t.Errorf("receive limit %d for a max message of %d: want it tight", limit, maxMsg)
	}
}
