// Package rsocketd is `sluice rsocket serve` as a service: the echo
// responder (rsocket/echo) served on every listen URL (TCP, TLS,
// WebSocket), optionally with resumable sessions kept in a journal, and
// the Prometheus collectors of its requests, oversize fire-and-forgets
// and journal. The command only turns flags into a Config.
package rsocketd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
	"github.com/sluicehq/sluice/rsocket/resumejournal"
	"github.com/sluicehq/sluice/seglog"
)

// Config is one server.
type Config struct {
	Listen       []string         // tcp://, tls://, ws:// or wss:// URLs
	TLS          *tls.Config      // for tls:// and wss://
	Options      []rsocket.Option // every listener's
	Resume       bool             // accept resumable clients
	ResumeConfig rsocket.ResumeConfig
	ResumeDir    string            // keep sessions in a journal here (implies Resume)
	ResumeSync   seglog.SyncPolicy // the journal's
	Registry     prometheus.Registerer
	Logger       *slog.Logger
}

// Server serves the echo responder; Ready says whether every listener
// is bound.
type Server struct {
	cfg       Config
	echo      *echo.Responder
	listening atomic.Bool
}

// New registers the responder's counters in cfg.Registry.
func New(cfg Config) *Server {
	return &Server{cfg: cfg, echo: echoResponder(cfg.Registry)}
}

// Ready is nil once every listener is bound (the metrics come up first,
// so that a long journal read is visible, and /readyz must not send
// clients to a port nobody listens on yet).
func (s *Server) Ready() error {
	if !s.listening.Load() {
		return errors.New("starting: the resume journal is read and the listeners bound first")
	}
	return nil
}

// Run reads the journal, binds every listener (printing "listening URL"
// on stdout for each, the port resolved) and serves until ctx ends or a
// listener fails.
func (s *Server) Run(ctx context.Context, stdout io.Writer) error {
	opts := s.cfg.Options
	if s.cfg.Resume || s.cfg.ResumeDir != "" {
		rcfg := s.cfg.ResumeConfig
		if s.cfg.ResumeDir != "" {
			store, err := resumejournal.Open(s.cfg.ResumeDir, resumejournal.Config{Sync: s.cfg.ResumeSync, Logger: s.cfg.Logger})
			if err != nil {
				return err
			}
			// After the listeners stop: the sessions stay in the journal
			// for the next server on this directory.
			defer store.Close()
			resumeJournalMetrics(s.cfg.Registry, store)
			st := store.Stats()
			s.cfg.Logger.Info("rsocket resume journal", "dir", s.cfg.ResumeDir, "sessions", st.Dormant, "repaired", st.Repaired, "dropped", st.Skipped)
			rcfg.Store = store
		}
		opts = append(opts[:len(opts):len(opts)], rsocket.WithResume(rcfg))
	}
	opts = append(opts[:len(opts):len(opts)], rsocket.WithOnConnect(oversizeMetric(s.cfg.Registry)))
	return s.serve(ctx, opts, stdout)
}

func (s *Server) serve(ctx context.Context, opts []rsocket.Option, stdout io.Writer) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(s.cfg.Listen))
	var wg sync.WaitGroup
	for _, u := range s.cfg.Listen {
		ln, path, err := rsocket.Listen(u)
		if err != nil {
			return fmt.Errorf("listen %s: %w", u, err)
		}
		scheme, _, _ := strings.Cut(u, "://")
		shown := scheme + "://" + ln.Addr().String() + path
		lopts := opts
		if scheme == "tls" || scheme == "wss" {
			lopts = append(opts[:len(opts):len(opts)], rsocket.WithTLS(s.cfg.TLS))
		}
		fmt.Fprintln(stdout, "listening", shown)
		s.cfg.Logger.Info("rsocket serving", "url", shown)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if path != "" {
				err = rsocket.ServeWebSocket(ctx, ln, path, s.echo, lopts...)
			} else {
				err = rsocket.Serve(ctx, ln, s.echo, lopts...)
			}
			if err != nil {
				errs <- fmt.Errorf("serve %s: %w", shown, err)
				stop()
			}
		}()
	}
	s.listening.Store(true)
	<-ctx.Done()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
