package otlpgrpc

import (
	"context"
	"fmt"
	"strings"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/testkit/h2raw"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// rawCodec sends a []byte as the message, whatever it holds, and ignores
// the answer's: it lets a test send what a protobuf client never would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

var exportMethods = []string{colmetricspb.MetricsService_Export_FullMethodName,
	collogspb.LogsService_Export_FullMethodName, coltracepb.TraceService_Export_FullMethodName}

// TestGRPCMalformed: a message that is not the service's request is
// Internal (grpc-go cannot unmarshal it; OTLP senders do not retry it)
// on every service, with nothing spooled.
func TestGRPCMalformed(t *testing.T) {
	fs, cc := serveGRPC(t, nil)
	for _, m := range exportMethods {
		err := cc.Invoke(context.Background(), m, []byte("\x0a\xff\xff\xff"), new([]byte), grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.Internal {
			t.Errorf("%s: a malformed message: %v, want Internal", m, err)
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of malformed messages", n)
	}
}

// TestGRPCOversizedMessage: a message of 64 MiB + 1 bytes (the HTTP
// bodies' bound) is ResourceExhausted on every service, refused from its
// length prefix, with nothing spooled; one of 5 MiB, over grpc-go's
// default 4 MiB, is taken (split into records within --max-record).
func TestGRPCOversizedMessage(t *testing.T) {
	fs, cc := serveGRPC(t, nil)
	huge := make([]byte, ingest.MaxRequestBytes+1)
	for _, m := range exportMethods {
		err := cc.Invoke(context.Background(), m, huge, new([]byte), grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("%s: a message of %d bytes: %v, want ResourceExhausted", m, len(huge), err)
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of oversized messages", n)
	}
	var big []byte
	for i := range 24 {
		b, _ := proto.Marshal(logsRequest(fmt.Sprintf("big-%d", i), strings.Repeat("z", 220<<10)))
		big = append(big, b...) // concatenated requests merge
	}
	if len(big) < 5<<20 {
		t.Fatalf("test message of %d bytes, want over 5 MiB", len(big))
	}
	if err := cc.Invoke(context.Background(), collogspb.LogsService_Export_FullMethodName, big, new([]byte), grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatalf("a 5 MiB message: %v", err)
	}
	if n := len(fs.Taken()); n < 20 {
		t.Fatalf("%d records of a 5 MiB request, want one or two resources a record", n)
	}
}

// TestGRPCManyStalledConnections: 20 connections that each begin a
// message and stop are all closed by the stall watch after one timeout,
// and a gRPC client is served throughout: the bound is each
// connection's, whatever their number.
func TestGRPCManyStalledConnections(t *testing.T) {
	s := startStallServer(t, false)
	const conns = 20
	var raws []*h2raw.Client
	for range conns {
		r := dialRaw(t, s)
		r.Open(1, exportPath, "agent")
		r.Data(t, 1, bigPrefix())
		raws = append(raws, r)
	}
	s.waitHeld(t, conns*int64(len(bigPrefix())))
	s.look(t, 0)
	s.look(t, defaults.StallTimeout)
	if got := s.stalledConns(t); got != conns {
		t.Fatalf("stalled_conns_total = %v, want %d", got, conns)
	}
	for _, r := range raws {
		r.WaitClosed(t, "a stalled connection")
	}
	testwait.For(t, "the watch to let go of every message", func() bool { return s.srv.stalls.HeldBytes() == 0 })
	cc, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := collogspb.NewLogsServiceClient(cc).Export(context.Background(), logsRequest("after", "x")); err != nil {
		t.Fatalf("an Export after the stalled connections: %v", err)
	}
}
