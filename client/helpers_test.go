package client_test

import (
	"log/slog"
	"net"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// quiet drops the logs of the in-process sinks and agents, so examples
// print only their output.
var quiet = slog.New(slog.DiscardHandler)

// testSink is an in-process sink on 127.0.0.1.
type testSink struct {
	s      *sink.Sink
	addr   string
	dir    string
	served chan error
}

// startSink starts a sink storing in dir, on addr ("127.0.0.1:0" for any
// port). It panics on error: examples have no *testing.T.
func startSink(dir, addr string) *testSink {
	s, err := sink.New(sink.Config{DataDir: dir, Logger: quiet})
	if err != nil {
		panic(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		s.Close()
		panic(err)
	}
	ts := &testSink{s: s, addr: lis.Addr().String(), dir: dir, served: make(chan error, 1)}
	go func() { ts.served <- grpcserve.Serve(s.Serving(), lis) }()
	return ts
}

// stop closes the sink and waits for Serve to return.
func (ts *testSink) stop() {
	ts.s.Close()
	<-ts.served
}
