package main

import "testing"

// e2eTransports are the transports an agent reaches a sink by in the
// end-to-end tests: every delivery guarantee must hold over each. rsocket
// is RSocket over TCP, rsocket-ws over WebSocket.
var e2eTransports = []string{"grpc", "rsocket", "rsocket-ws"}

// e2eSink is where one sink of an end-to-end test listens: gRPC always
// (consumers read over it), RSocket too when the test runs over RSocket.
type e2eSink struct {
	transport string
	grpc      string // HOST:PORT of --listen
	rsocket   string // HOST:PORT of --listen-rsocket, or ""
}

func newE2ESink(t *testing.T, transport string) e2eSink {
	s := e2eSink{transport: transport, grpc: freeAddr(t)}
	if transport != "grpc" {
		s.rsocket = freeAddr(t)
	}
	return s
}

// listenArgs are the sink's listening flags.
func (s e2eSink) listenArgs() []string {
	switch s.transport {
	case "rsocket":
		return []string{"--listen", s.grpc, "--listen-rsocket", "tcp://" + s.rsocket}
	case "rsocket-ws":
		return []string{"--listen", s.grpc, "--listen-rsocket", "ws://" + s.rsocket + "/sluice"}
	}
	return []string{"--listen", s.grpc}
}

// deliveryAddr is the HOST:PORT the agent's sessions reach (a proxy in
// front of the sink forwards to it).
func (s e2eSink) deliveryAddr() string {
	if s.rsocket != "" {
		return s.rsocket
	}
	return s.grpc
}

// agentSink is the agent's --sink for a sink (or a proxy) at hostport.
func (s e2eSink) agentSink(hostport string) string {
	switch s.transport {
	case "rsocket":
		return "rsocket+tcp://" + hostport
	case "rsocket-ws":
		return "rsocket+ws://" + hostport + "/sluice"
	}
	return hostport
}

// sinkArgs are "sink" and the listening flags followed by more.
func (s e2eSink) sinkArgs(more ...string) []string {
	return append(append([]string{"sink"}, s.listenArgs()...), more...)
}

// eachTransport runs f as a subtest per transport.
func eachTransport(t *testing.T, f func(t *testing.T, transport string)) {
	for _, tr := range e2eTransports {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}
