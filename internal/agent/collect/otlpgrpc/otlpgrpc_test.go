package otlpgrpc

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/agent/collect"
	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/spooltest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// defaultMaxRecord is the agent's --max-record by default.
const defaultMaxRecord = int(defaults.AgentMaxMessage) - ingest.BatchOverhead

func logsRequest(service string, bodies ...string) *collogspb.ExportLogsServiceRequest {
	var recs []*logspb.LogRecord
	for _, b := range bodies {
		recs = append(recs, &logspb.LogRecord{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: b}}})
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: service}}}}},
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}},
	}}}
}

// serveGRPC starts the OTLP/gRPC services on loopback over a fake spool
// and returns a connection to them.
func serveGRPC(t *testing.T, mod func(*collect.Config)) (*spooltest.Recorder, *grpc.ClientConn) {
	t.Helper()
	fs := &spooltest.Recorder{}
	cfg := collect.Config{Ingest: fs.Ingest, MaxRecordBytes: defaultMaxRecord}
	if mod != nil {
		mod(&cfg)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, collect.New(cfg), lis, Options{}) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeGRPC: %v", err)
		}
	})
	return fs, cc
}

// TestGRPCExport: each service's Export spools its request (gzip
// compressed too) as its kind; a full or failing spool is Unavailable
// (OTLP senders retry it), a resource over --max-record
// InvalidArgument (they drop it), a missing token Unauthenticated.
func TestGRPCExport(t *testing.T) {
	fs, cc := serveGRPC(t, nil)
	ctx := context.Background()
	logs := logsRequest("grpc-svc", "over grpc")
	if _, err := collogspb.NewLogsServiceClient(cc).Export(ctx, logs, grpc.UseCompressor(gzip.Name)); err != nil {
		t.Fatal(err)
	}
	if _, err := colmetricspb.NewMetricsServiceClient(cc).Export(ctx, &colmetricspb.ExportMetricsServiceRequest{}); err != nil {
		t.Fatal(err)
	}
	traces := &coltracepb.ExportTraceServiceRequest{}
	if _, err := coltracepb.NewTraceServiceClient(cc).Export(ctx, traces); err != nil {
		t.Fatal(err)
	}
	recs := fs.Taken()
	if len(recs) != 1 {
		t.Fatalf("%d records, want the logs request's (the empty ones hold nothing)", len(recs))
	}
	k, b, err := telemetry.Decode(recs[0])
	var got collogspb.ExportLogsServiceRequest
	if err != nil || k != telemetry.OTLPLogs || proto.Unmarshal(b, &got) != nil || !proto.Equal(&got, logs) {
		t.Fatalf("spooled %v %v %v, want the logs request", k, err, &got)
	}

	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{{"spool full", spool.ErrFull, codes.Unavailable}, {"disk full", spool.ErrNoSpace, codes.Unavailable}} {
		fs.Fail(tc.err)
		_, err := collogspb.NewLogsServiceClient(cc).Export(ctx, logs)
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	_, small := serveGRPC(t, func(c *collect.Config) { c.MaxRecordBytes = 1 << 10 })
	_, err = collogspb.NewLogsServiceClient(small).Export(ctx, logsRequest("big", strings.Repeat("x", 2<<10)))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("one resource over --max-record: %v, want InvalidArgument", err)
	}
}

// TestGRPCTokens: with ingest tokens, an Export without "authorization:
// Bearer TOKEN" is Unauthenticated and spools nothing.
func TestGRPCTokens(t *testing.T) {
	tokensFile := t.TempDir() + "/tokens"
	os.WriteFile(tokensFile, []byte("grpc-token-0123456789 sdk\n"), 0o600)
	tokens, err := auth.LoadTokens(tokensFile)
	if err != nil {
		t.Fatal(err)
	}
	fs, cc := serveGRPC(t, func(c *collect.Config) { c.Tokens = tokens })
	client := collogspb.NewLogsServiceClient(cc)
	if _, err := client.Export(context.Background(), logsRequest("s", "x")); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: %v, want Unauthenticated", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer grpc-token-0123456789")
	if _, err := client.Export(ctx, logsRequest("s", "x")); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if n := len(fs.Taken()); n != 1 {
		t.Fatalf("%d records, want the authorized request's", n)
	}
}

// TestGRPCFrozenClient: a client that starts an Export message and then
// freezes (answers nothing, not even the HTTP/2 pings, as a stopped
// process or a vanished host) has its connection closed once it has been
// quiet for the idle time and a ping went unanswered, with nothing
// spooled; before, the stream and what it had sent were held for as
// long as the kernel kept the connection.
func TestGRPCFrozenClient(t *testing.T) {
	fs := &spooltest.Recorder{}
	rc := collect.New(collect.Config{Ingest: fs.Ingest, MaxRecordBytes: defaultMaxRecord})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// grpc-go pings no sooner than after a second of quiet; the HTTP
	// tests' body idle timeout is 50 ms.
	srv := NewServer(rc, Options{PingAfter: time.Second})
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The start of a unary call whose message declares 1 MiB and sends
	// 16 bytes of it, written with a bare HTTP/2 framer that will never
	// answer a ping.
	conn.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "x"},
		{":path", "/opentelemetry.proto.collector.logs.v1.LogsService/Export"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes(), EndHeaders: true})
	fr.WriteData(1, false, append([]byte{0, 0, 0x10, 0, 0}, make([]byte, 16)...))
	// Read (the server's SETTINGS, pings, GOAWAY) until it closes; the
	// deadline only turns a hang into a failure.
	conn.SetReadDeadline(time.Now().Add(testwait.Bound))
	for {
		if _, err := fr.ReadFrame(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the server kept a frozen client's connection open")
			}
			break
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled from a frozen client", n)
	}
}

// TestGRPCCompressionBomb: a gzip-compressed Export whose message
// decompresses to more than the 64 MiB an HTTP body may decode to is
// refused (ResourceExhausted: grpc-go stops decompressing at the bound)
// with nothing spooled, not decoded whole.
func TestGRPCCompressionBomb(t *testing.T) {
	fs, cc := serveGRPC(t, nil)
	bomb := logsRequest("bomb", string(make([]byte, ingest.MaxRequestBytes)))
	_, err := collogspb.NewLogsServiceClient(cc).Export(context.Background(), bomb, grpc.UseCompressor(gzip.Name))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a message decompressing past %d bytes: %v, want ResourceExhausted", ingest.MaxRequestBytes, err)
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled from a compression bomb", n)
	}
}
