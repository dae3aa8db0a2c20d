package otlpgrpc

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"

	"github.com/sluicehq/sluice/internal/agent/collect"
)

// BenchmarkGRPCExport measures an Export of a 200 KiB logs request over
// loopback, spooled nowhere: what the receiver (and its stall watch)
// costs per request.
func BenchmarkGRPCExport(b *testing.B) {
	rc := collect.New(collect.Config{Ingest: func(context.Context, [][]byte) error { return nil }, MaxRecordBytes: defaultMaxRecord})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, rc, lis, Options{}) }()
	defer func() { cancel(); <-done }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	req := logsRequest("bench", strings.Repeat("b", 200<<10))
	b.SetBytes(int64(proto.Size(req)))
	client := collogspb.NewLogsServiceClient(cc)
	b.ResetTimer()
	for range b.N {
		if _, err := client.Export(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
