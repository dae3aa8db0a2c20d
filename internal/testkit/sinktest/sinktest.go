// Package sinktest runs a real sink (internal/sink) on a loopback port
// for the tests of what talks to one: the agent, the status page, the
// hostile lab's targets. Those tests had a startSink each; the parts they
// shared are here: start with a config, stop and wait for Serve to
// return, start again on the same address and data directory, as a
// restarted sink is found where its agents expect it, and read back
// every stored record as a consumer would (read.go).
package sinktest

import (
	"log/slog"
	"net"
	"testing"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// Sink is a sink serving gRPC on Addr. The embedded *sink.Sink is the
// running one (a new one after each Restart).
type Sink struct {
	*sink.Sink
	// Addr is the host:port it serves on; Restart keeps it.
	Addr string

	tb     testing.TB
	cfg    sink.Config
	served chan error // Serve's result; nil while stopped
}

// Start starts a sink with cfg, listening on addr ("127.0.0.1:0": a free
// port). An empty cfg.DataDir is a directory of the test's, a nil
// cfg.Logger discards. The test's cleanup stops it.
func Start(tb testing.TB, cfg sink.Config, addr string) *Sink {
	tb.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sink{Addr: addr, tb: tb, cfg: cfg}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// DataDir is the sink's data directory.
func (s *Sink) DataDir() string { return s.cfg.DataDir }

// Restart starts the sink again, on the same data directory and address,
// after Stop (the test's connections to the old one are gone). It waits
// for the address to be free: the old listener's port may linger a
// moment after it closed.
func (s *Sink) Restart() {
	s.tb.Helper()
	if s.served != nil {
		s.tb.Fatal("sinktest: Restart of a running sink; Stop it first")
	}
	sk, err := sink.New(s.cfg)
	if err != nil {
		s.tb.Fatal(err)
	}
	var lis net.Listener
	testwait.For(s.tb, "the sink's address "+s.Addr+" to be free", func() bool {
		lis, err = net.Listen("tcp", s.Addr)
		return err == nil
	})
	s.Addr = lis.Addr().String()
	s.Sink, s.served = sk, make(chan error, 1)
	go func(served chan error) { served <- grpcserve.Serve(sk.Serving(), lis) }(s.served)
}

// Stop closes the sink and waits for Serve to return; stopping a stopped
// sink does nothing.
func (s *Sink) Stop() {
	if s.served == nil {
		return
	}
	if err := s.Sink.Close(); err != nil {
		s.tb.Logf("sink close: %v", err)
	}
	<-s.served
	s.served = nil
}
