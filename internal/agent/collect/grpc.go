package collect

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // OTLP/gRPC senders may compress with gzip
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/defaults"
)

// NewGRPCServer is a gRPC server with the OTLP metrics, logs and trace
// services on it, behind the same tokens and TLS (nil: plaintext) as the
// HTTP endpoints. A connection quiet for the body idle timeout is
// pinged and closed when the ping goes unanswered. A message is bounded like an HTTP body, after
// decompression too (grpc-go checks the decompressed size).
func (rc *Receiver) NewGRPCServer(tlsCfg *tls.Config) *grpc.Server {
	// A client frozen or gone mid-message (no FIN) would hold its stream
	// and what it sent for as long as the kernel keeps the connection:
	// the pings find it, as the body idle timeout does for HTTP.
	ka := keepalive.ServerParameters{Time: cmp.Or(rc.cfg.grpcPingAfter, rc.cfg.BodyIdleTimeout), Timeout: defaults.KeepaliveTimeout}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxBody), grpc.UnaryInterceptor(rc.authorizeGRPC), grpc.KeepaliveParams(ka)}
	if tlsCfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	srv := grpc.NewServer(opts...)
	colmetricspb.RegisterMetricsServiceServer(srv, metricsService{rc: rc})
	collogspb.RegisterLogsServiceServer(srv, logsService{rc: rc})
	coltracepb.RegisterTraceServiceServer(srv, traceService{rc: rc})
	return srv
}

// ServeGRPC serves OTLP/gRPC on lis until ctx ends, then stops
// gracefully: calls in flight get shutdownTimeout to be spooled and
// answered.
func (rc *Receiver) ServeGRPC(ctx context.Context, lis net.Listener, tlsCfg *tls.Config, shutdownTimeout time.Duration) error {
	srv := rc.NewGRPCServer(tlsCfg)
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(shutdownTimeout):
			srv.Stop()
		}
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// authorizeGRPC requires "authorization: Bearer TOKEN" metadata when
// tokens are set, as the HTTP endpoints require the header.
func (rc *Receiver) authorizeGRPC(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if rc.cfg.Tokens != nil {
		md, _ := metadata.FromIncomingContext(ctx)
		if err := ingest.CheckBearer(rc.cfg.Tokens, md.Get("authorization")); err != nil {
			rc.count(info.FullMethod, int(codes.Unauthenticated))
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
	}
	return handler(ctx, req)
}

// exportGRPC spools one decoded Export request of signal s. It answers
// InvalidArgument for what can never be stored (a resource over
// --max-record: OTLP senders do not retry it) and Unavailable while the
// spool is full or failing (they retry it).
func (rc *Receiver) exportGRPC(ctx context.Context, s signal, req proto.Message) error {
	endpoint := "grpc" + s.path
	body, err := proto.Marshal(req)
	if err == nil {
		var records [][]byte
		if records, err = splitRecords(body, s.kind, rc.cfg.MaxRecordBytes); err == nil {
			err = rc.spool(ctx, s.kind.String(), records)
		}
	}
	if err == nil {
		rc.count(endpoint, int(codes.OK))
		return nil
	}
	code := codes.Unavailable
	if st := httpStatusFor(err, http.StatusServiceUnavailable); st == http.StatusBadRequest || st == http.StatusRequestEntityTooLarge {
		code = codes.InvalidArgument
	} else {
		rc.log.Warn("OTLP/gRPC request not spooled", "path", s.path, "err", err)
	}
	rc.count(endpoint, int(code))
	return status.Error(code, err.Error())
}

type metricsService struct {
	colmetricspb.UnimplementedMetricsServiceServer
	rc *Receiver
}

func (m metricsService) Export(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	if err := m.rc.exportGRPC(ctx, metricsSignal, req); err != nil {
		return nil, err
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

type logsService struct {
	collogspb.UnimplementedLogsServiceServer
	rc *Receiver
}

func (l logsService) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	if err := l.rc.exportGRPC(ctx, logsSignal, req); err != nil {
		return nil, err
	}
	return &collogspb.ExportLogsServiceResponse{}, nil
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	rc *Receiver
}

func (t traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if err := t.rc.exportGRPC(ctx, tracesSignal, req); err != nil {
		return nil, err
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
