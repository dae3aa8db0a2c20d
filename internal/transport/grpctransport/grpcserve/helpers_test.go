package grpcserve

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/transport/serving"
)

// wait bounds every blocking step of a test: generous, so that a loaded
// machine slows a test down instead of failing it. Nothing waits for it
// to pass unless the test is failing.
const wait = 60 * time.Second

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
	served chan error
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
		Logger:  slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
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
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	h.s, h.host = s, s.Serving()
	if h.hostMod != nil {
		h.hostMod(&h.host)
	}
	h.srv = New(h.host)
	served := make(chan error, 1)
	h.served = served
	go func() { served <- h.srv.Serve(lis) }()
	h.cc, h.client = sinkclient.Dial(h.t, lis.Addr().String(), h.dial...)
}

func (h *harness) stop() {
	if h.s == nil {
		return
	}
	sinkclient.Shutdown(h.t, h.cc, h.s, h.served)
	h.s = nil
}

// metricValue returns the value of the sink's counter name.
func metricValue(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	mfs, err := h.s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// agentConn is a raw Send stream: the test plays the agent.
type agentConn struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[sluicev1.Request, sluicev1.Response]
	resps  chan *sluicev1.Response
	end    chan error
}

// connect opens a Send stream and completes the handshake.
func (h *harness) connect(agent string) *agentConn {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	stream, err := h.client.Send(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	a := &agentConn{t: h.t, stream: stream, resps: make(chan *sluicev1.Response, 1024), end: make(chan error, 1)}
	go sinkclient.Pump(stream.Recv, a.resps, a.end)
	a.send(sinkclient.Hello(agent))
	if r := a.next(); r.GetWelcome() == nil {
		h.t.Fatalf("first response %v is not a Welcome", r)
	}
	return a
}

func (a *agentConn) send(req *sluicev1.Request) {
	a.t.Helper()
	// io.EOF: the sink ended the stream; Recv reports why.
	if err := a.stream.Send(req); err != nil && err != io.EOF {
		a.t.Fatalf("Send: %v", err)
	}
}

// next returns the next response, failing the test if none comes.
func (a *agentConn) next() *sluicev1.Response {
	a.t.Helper()
	return sinkclient.Next(a.t, a.resps, a.end, wait, "stream ended", "no response")
}

// collect reads responses until every id in ids is acked.
func (a *agentConn) collect(ids ...uint64) {
	a.t.Helper()
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		for _, rg := range a.next().GetAck().GetRanges() {
			for id := rg.First; id <= rg.Last; id++ {
				delete(want, id)
			}
		}
	}
}

func plainReq(id uint64, recs ...string) *sluicev1.Request {
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add([]byte(r)); err != nil {
			panic(err)
		}
	}
	return &sluicev1.Request{Version: 1, MessageId: id, RecordCount: uint32(len(recs)),
		Payload: &sluicev1.Request_Plain{Plain: bytes.Clone(b.Bytes())}}
}

// reader is a raw Read stream: the test plays the consumer.
type reader struct {
	t     testing.TB
	send  func(*sluicev1.ReadRequest) error
	resps chan *sluicev1.ReadResponse
	end   chan error
}

func (h *harness) read(start *sluicev1.ReadStart) *reader {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	stream, err := h.client.Read(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	r := &reader{t: h.t, send: stream.Send, resps: make(chan *sluicev1.ReadResponse, 1024), end: make(chan error, 1)}
	go sinkclient.Pump(stream.Recv, r.resps, r.end)
	if err := r.send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: start}}); err != nil && err != io.EOF {
		h.t.Fatal(err)
	}
	return r
}

func (r *reader) request(n uint32) {
	r.t.Helper()
	if err := r.send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: n}}); err != nil && err != io.EOF {
		r.t.Fatal(err)
	}
}

func (r *reader) next() *sluicev1.ReadResponse {
	r.t.Helper()
	return sinkclient.Next(r.t, r.resps, r.end, wait, "read stream ended", "nothing read")
}
