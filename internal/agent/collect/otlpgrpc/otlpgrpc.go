// Package otlpgrpc is the agent's OTLP/gRPC receiver: the OTLP metrics,
// logs and trace services' Export over gRPC, each request spooled by a
// collect.Receiver as the OTLP/HTTP endpoints spool theirs. It is the
// only part of the collectors' receivers that speaks gRPC, which stays
// out of the agent's other packages (internal/docs
// TestOnlyTransportsImportGRPC).
package otlpgrpc

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

	"github.com/sluicehq/sluice/internal/agent/collect"
	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// Options are the server's settings beyond the Receiver's.
type Options struct {
	// TLS, when set, is the ingest listener's TLS; nil serves plaintext.
	TLS *tls.Config
	// PingAfter is the quiet time after which a connection is pinged
	// (default: the Receiver's body idle timeout).
	PingAfter time.Duration
	// StallTimeout: a connection whose stream holds at least
	// defaults.StallBytes of an incomplete message and received less than
	// that more of it in this time is closed (default
	// defaults.StallTimeout, as the sink's --stall-timeout).
	StallTimeout time.Duration
	// ShutdownTimeout bounds how long Serve's graceful stop waits for
	// calls in flight (default defaults.IngestShutdownTimeout).
	ShutdownTimeout time.Duration
	// Logger gets a warning for each connection closed as stalled;
	// Registry, when set, the server's metrics.
	Logger   *slog.Logger
	Registry prometheus.Registerer

	// stallTick, stallNow and stallChecked drive the stall watch in tests
	// (grpcserve.StallOptions).
	stallTick    <-chan time.Time
	stallNow     func() time.Time
	stallChecked func()
}

// Server is the OTLP/gRPC receiver's gRPC server and the stall watch of
// its connections.
type Server struct {
	srv    *grpc.Server
	stalls *grpcserve.StallWatch
	tls    bool

	stopOnce sync.Once
	stopped  chan struct{} // closed by Stop and GracefulStop: ends the watch
}

// NewServer is a gRPC server with the OTLP metrics, logs and trace
// services on it, behind rc's tokens and opts.TLS. A connection quiet
// for the body idle timeout is pinged and closed when the ping goes
// unanswered. A message is bounded like an HTTP body, after
// decompression too (grpc-go stops decompressing at the bound). A client
// that answers the pings but trickles (or stops) a message is closed by
// the stall watch, the sink's (grpcserve.StallWatch): grpc-go buffers a
// message until it is whole, with no deadline of its own.
func NewServer(rc *collect.Receiver, opts Options) *Server {
	s := &Server{tls: opts.TLS != nil, stopped: make(chan struct{}),
		stalls: newStallWatch(opts)}
	// A client frozen or gone mid-message (no FIN) would hold its stream
	// and what it sent for as long as the kernel keeps the connection:
	// the pings find it, as the body idle timeout does for HTTP.
	ka := keepalive.ServerParameters{Time: cmp.Or(opts.PingAfter, rc.BodyIdleTimeout()), Timeout: defaults.KeepaliveTimeout}
	sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(ingest.MaxRequestBytes), grpc.KeepaliveParams(ka),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if err := rc.Authorize(md.Get("authorization")); err != nil {
				rc.CountRefused(info.FullMethod, codes.Unauthenticated.String())
				return nil, status.Error(codes.Unauthenticated, err.Error())
			}
			return handler(ctx, req)
		})}
	if opts.TLS != nil {
		sopts = append(sopts, grpc.Creds(s.stalls.Creds(credentials.NewTLS(opts.TLS))))
	}
	s.srv = grpc.NewServer(sopts...)
	colmetricspb.RegisterMetricsServiceServer(s.srv, metricsService{rc: rc})
	collogspb.RegisterLogsServiceServer(s.srv, logsService{rc: rc})
	coltracepb.RegisterTraceServiceServer(s.srv, traceService{rc: rc})
	return s
}

// newStallWatch is the stall watch of opts, counting and logging the
// connections it closes.
func newStallWatch(opts Options) *grpcserve.StallWatch {
	timeout := cmp.Or(opts.StallTimeout, defaults.StallTimeout)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stalled := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "agent",
		Name: "otlp_grpc_stalled_conns_total",
		Help: "OTLP/gRPC connections closed because a stream began a message and stopped sending it (or trickled it) for the stall timeout."})
	w := grpcserve.NewStallWatch(grpcserve.StallOptions{Timeout: timeout,
		Tick: opts.stallTick, Now: opts.stallNow, Checked: opts.stallChecked,
		OnStall: func(peer string, held int64) {
			stalled.Inc()
			log.Warn("agent: an OTLP/gRPC client began a message and stopped sending it; closing its connection",
				"peer", peer, "held_bytes", held, "stall_timeout", timeout)
		}})
	if opts.Registry != nil {
		opts.Registry.MustRegister(stalled, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "agent",
			Name: "otlp_grpc_partial_message_bytes",
			Help: "Bytes the OTLP/gRPC receiver holds of messages not yet received whole."},
			func() float64 { return float64(w.HeldBytes()) }))
	}
	return w
}

// Serve serves on lis until Stop or GracefulStop, with the stall watch
// looking at its connections. It returns nil once stopped.
func (s *Server) Serve(lis net.Listener) error {
	go s.stalls.Run(s.stopped)
	defer s.stopWatch() // also when the listener fails
	if err := s.srv.Serve(s.stalls.Listener(lis, !s.tls)); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// GracefulStop stops accepting connections and waits for the calls in
// flight.
func (s *Server) GracefulStop() {
	s.srv.GracefulStop()
	s.stopWatch()
}

// Stop closes every connection.
func (s *Server) Stop() {
	s.srv.Stop()
	s.stopWatch()
}

func (s *Server) stopWatch() { s.stopOnce.Do(func() { close(s.stopped) }) }

// Serve serves OTLP/gRPC on lis until ctx ends, then stops gracefully:
// calls in flight get opts.ShutdownTimeout to be spooled and answered.
func Serve(ctx context.Context, rc *collect.Receiver, lis net.Listener, opts Options) error {
	srv := NewServer(rc, opts)
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(cmp.Or(opts.ShutdownTimeout, defaults.IngestShutdownTimeout)):
			srv.Stop()
		}
	}()
	return srv.Serve(lis)
}

// export spools req and turns the outcome into the gRPC status OTLP
// senders act on: InvalidArgument for what can never be stored (they
// drop it), Unavailable while the spool is full or failing (they retry).
func export(ctx context.Context, rc *collect.Receiver, s collect.Signal, method string, req proto.Message) error {
	err := rc.ExportOTLP(ctx, method, s, req)
	switch {
	case err == nil:
		return nil
	case collect.Permanent(err):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

type metricsService struct {
	colmetricspb.UnimplementedMetricsServiceServer
	rc *collect.Receiver
}

func (m metricsService) Export(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	if err := export(ctx, m.rc, collect.Metrics, colmetricspb.MetricsService_Export_FullMethodName, req); err != nil {
		return nil, err
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

type logsService struct {
	collogspb.UnimplementedLogsServiceServer
	rc *collect.Receiver
}

func (l logsService) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	if err := export(ctx, l.rc, collect.Logs, collogspb.LogsService_Export_FullMethodName, req); err != nil {
		return nil, err
	}
	return &collogspb.ExportLogsServiceResponse{}, nil
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	rc *collect.Receiver
}

func (t traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if err := export(ctx, t.rc, collect.Traces, coltracepb.TraceService_Export_FullMethodName, req); err != nil {
		return nil, err
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}
