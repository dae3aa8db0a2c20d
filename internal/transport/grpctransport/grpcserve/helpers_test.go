package grpcserve

import (
	"testing"

	"google.golang.org/grpc"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/metrictest"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/transport/serving"
)

// wait bounds every blocking step of a test: generous, so that a loaded
// machine slows a test down instead of failing it. Nothing waits for it
// to pass unless the test is failing.
const wait = sinkclient.Wait

// harness runs a sink served by this package's Server on 127.0.0.1:0,
// with a client connection to it (internal/sink's tests have the fuller
// one; this one has what the watches' tests need).
type harness struct {
	t      testing.TB
	cfg    sink.Config
	s      *sink.Sink
	host   serving.Host
	srv    *Server
	cc     *grpc.ClientConn
	client sluicev1.SinkClient
	logs   *syncbuf.Buffer
	served *sinkclient.Served
	dial   []grpc.DialOption
	// hostMod, if set, changes what the server is given (test hooks).
	hostMod func(*serving.Host)
}

func newHarness(t testing.TB, hostMod func(*serving.Host)) *harness {
	t.Helper()
	return newHarnessWith(t, nil, hostMod)
}

// newHarnessWith is newHarness with the sink's Config changed by cfgMod.
func newHarnessWith(t testing.TB, cfgMod func(*sink.Config), hostMod func(*serving.Host)) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncbuf.Buffer{}, hostMod: hostMod}
	h.cfg = sink.Config{
		DataDir: t.TempDir(),
		Logger:  sinkclient.Logger(h.logs),
	}
	if cfgMod != nil {
		cfgMod(&h.cfg)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	s, err := sink.New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s, h.host = s, s.Serving()
	if h.hostMod != nil {
		h.hostMod(&h.host)
	}
	h.srv = New(h.host)
	h.served = sinkclient.Serve(h.t, s, h.srv.Serve, h.dial...)
	h.cc, h.client = h.served.CC, h.served.Client
}

func (h *harness) stop() {
	if h.s == nil {
		return
	}
	h.served.Stop(h.t)
	h.s = nil
}

// metricValue returns the value of the sink's counter name.
func metricValue(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	return metrictest.Value(t, h.s.Registry(), name)
}

// connect opens a Send stream and completes the handshake: the test
// plays the agent.
func (h *harness) connect(agent string) *sinkclient.Agent {
	h.t.Helper()
	return sinkclient.ConnectAgent(h.t, h.client, agent)
}

// read opens a raw Read stream from start: the test plays the consumer.
func (h *harness) read(start *sluicev1.ReadStart) *sinkclient.Reader {
	h.t.Helper()
	return sinkclient.OpenReader(h.t, h.client, start)
}
