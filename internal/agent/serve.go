package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"

	"github.com/sluicehq/sluice/internal/agent/collect/otlpgrpc"
	"github.com/sluicehq/sluice/internal/connlimit"
	"github.com/sluicehq/sluice/internal/defaults"
)

// ServeIngest serves the ingest endpoint (Handler) on lis, at most
// defaults.IngestMaxConns connections at once, until ctx
// ends, then shuts it down gracefully: requests in flight get
// defaults.IngestShutdownTimeout to finish (their lines spooled and
// answered) before the connections close.
func (a *Agent) ServeIngest(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: defaults.IngestReadHeaderTimeout,
		IdleTimeout: defaults.IngestIdleConnTimeout}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), defaults.IngestShutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(connlimit.New(lis, defaults.IngestMaxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeOTLPGRPC serves the OTLP/gRPC receiver (the metrics, logs and
// trace services' Export) on lis until ctx ends, with the ingest
// tokens and tlsCfg (nil: plaintext), then stops it gracefully as
// ServeIngest does.
func (a *Agent) ServeOTLPGRPC(ctx context.Context, lis net.Listener, tlsCfg *tls.Config) error {
	return otlpgrpc.Serve(ctx, a.collect, connlimit.New(lis, defaults.IngestMaxConns), otlpgrpc.Options{TLS: tlsCfg, StallTimeout: a.cfg.StallTimeout,
		Logger: a.log, Registry: a.cfg.Registry})
}
