package status

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/connlimit"
)

// MaxConns bounds the connections a daemon's metrics and status listener
// serves at once (internal/connlimit); the rest wait in the kernel's
// accept queue. Scrapers and status pages need a few; 100 clients
// resetting mid-request in a loop had thousands accepted at once under
// load, and the runtime keeps what that peak grew (a goroutine record
// and a poll descriptor per connection) for the daemon's life.
const MaxConns = 1024

// Serve serves a daemon's HTTP endpoints on lis (nil: none) until ctx
// ends: /metrics from reg; /healthz, 200 while the process serves HTTP
// and healthy (nil: always) returns nil, 503 with the reason when only a
// restart helps; /readyz, 200 when ready (nil: always) returns nil, 503
// with the reason otherwise. With a page config, also the status page at
// / and its RSocket API at /rsocket; the config's Gatherer, Ready and Log
// default to reg, ready and log. It serves at most MaxConns connections
// at once.
func Serve(ctx context.Context, lis net.Listener, reg *prometheus.Registry, log *slog.Logger, ready, healthy func() error, page ...Config) {
	if lis == nil {
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", MetricsHandler(reg))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if healthy != nil {
			if err := healthy(); err != nil {
				http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
	for _, st := range page {
		if st.Gatherer == nil {
			st.Gatherer = reg
		}
		if st.Ready == nil {
			st.Ready = ready
		}
		if st.Log == nil {
			st.Log = log
		}
		mux.Handle("/", Handler(ctx, st))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(connlimit.New(lis, MaxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", lis.Addr().String())
}
