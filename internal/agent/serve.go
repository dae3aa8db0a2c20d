package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"

	"github.com/sluicehq/sluice/internal/agent/collect/otlpgrpc"
	"github.com/sluicehq/sluice/internal/defaults"
)

// ServeIngest serves the ingest endpoint (Handler) on lis until ctx
// ends, then shuts it down gracefully: requests in flight get
// defaults.IngestShutdownTimeout to finish (their lines spooled and
// answered) before the connections close.
func (a *Agent) ServeIngest(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: defaults.IngestReadHeaderTimeout}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), defaults.IngestShutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeOTLPGRPC serves the OTLP/gRPC receiver (the metrics, logs and
// trace services' Export) on lis until ctx ends, with the ingest
// tokens and tlsCfg (nil: plaintext), then stops it gracefully as
// ServeIngest does.
func (a *Agent) ServeOTLPGRPC(ctx context.Context, lis net.Listener, tlsCfg *tls.Config) error {
	return otlpgrpc.Serve(ctx, a.collect, lis, otlpgrpc.Options{TLS: tlsCfg, StallTimeout: a.cfg.StallTimeout,
		Logger: a.log, Registry: a.cfg.Registry})
}
