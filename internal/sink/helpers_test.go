package sink

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
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// wait bounds every blocking step of a test: generous, so that a loaded
// machine slows a test down instead of failing it. Nothing waits for it
// to pass unless the test is failing.
const wait = 60 * time.Second

// quiet is how long a test watches for something that must not happen
// (an ack while the writer is held, a message without credit, a stream
// beyond the limit). A negative check can only watch for a while: on a
// slow machine it may miss a bug, but it never fails a correct sink, since
// each use is one where the event is ruled out until the test itself
// releases it (and the positive check that follows catches ordering).
const quiet = 150 * time.Millisecond

// harness runs a Sink on 127.0.0.1:0 with a client connection to it.
type harness struct {
	t      testing.TB
	cfg    Config
	s      *Sink
	cc     *grpc.ClientConn
	client sluicev1.SinkClient
	logs   *syncbuf.Buffer
	served chan error
	dial   []grpc.DialOption
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncbuf.Buffer{}}
	h.cfg = Config{
		DataDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if mod != nil {
		mod(&h.cfg)
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	h.t.Helper()
	s, err := New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
	served := make(chan error, 1)
	h.served = served
	go func() { served <- grpcserve.Serve(s.Serving(), lis) }()
	h.cc, h.client = sinkclient.Dial(h.t, lis.Addr().String(), h.dial...)
}

func (h *harness) stop() {
	if h.s == nil {
		return
	}
	sinkclient.Shutdown(h.t, h.cc, h.s, h.served)
	h.s = nil
}

func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

// stored returns the (agent, message id) of every store record, in order.
func (h *harness) stored() []string {
	h.t.Helper()
	var out []string
	it := h.s.Store().NewIterator(0, 1<<20)
	for it.Next() {
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			h.t.Fatalf("store record %d: %v", it.Offset(), err)
		}
		out = append(out, string(m.AgentID)+"/"+itoa(m.MessageID))
	}
	if err := it.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func itoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for ; n > 0; n /= 10 {
		i--
		b[i] = byte('0' + n%10)
	}
	return string(b[i:])
}

// agentConn is a raw Send stream: the test plays the agent.
type agentConn struct {
	t       testing.TB
	stream  grpc.BidiStreamingClient[sluicev1.Request, sluicev1.Response]
	cancel  context.CancelFunc
	welcome *sluicev1.Welcome
	resps   chan *sluicev1.Response
	end     chan error // the stream's final status (io.EOF for OK)
}

func (h *harness) open() *agentConn {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := h.client.Send(ctx)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	a := &agentConn{t: h.t, stream: stream, cancel: cancel, resps: make(chan *sluicev1.Response, 1024), end: make(chan error, 1)}
	h.t.Cleanup(cancel)
	go sinkclient.Pump(stream.Recv, a.resps, a.end)
	return a
}

// connect opens a stream and completes the handshake.
func (h *harness) connect(agent string, dicts ...uint32) *agentConn {
	h.t.Helper()
	a := h.open()
	a.send(sinkclient.Hello(agent, dicts...))
	r := a.next()
	if a.welcome = r.GetWelcome(); a.welcome == nil {
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

// none checks that no response arrives for a while.
func (a *agentConn) none() {
	a.t.Helper()
	select {
	case r, ok := <-a.resps:
		if ok {
			a.t.Fatalf("unexpected response %v", r)
		}
	case <-time.After(quiet):
	}
}

// status waits for the stream to end and returns its status error (nil
// for OK).
func (a *agentConn) status() error {
	a.t.Helper()
	for {
		select {
		case _, ok := <-a.resps:
			if !ok {
				err := <-a.end
				if err == io.EOF {
					return nil
				}
				return err
			}
		case <-time.After(wait):
			a.t.Fatal("stream did not end")
		}
	}
}

// collect reads responses until every id in ids is acked and returns the
// ServiceMessages seen meanwhile.
func (a *agentConn) collect(ids ...uint64) []*sluicev1.ServiceMessage {
	a.t.Helper()
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var infos []*sluicev1.ServiceMessage
	for len(want) > 0 {
		r := a.next()
		if info := r.GetInfo(); info != nil {
			infos = append(infos, info)
			continue
		}
		for _, rg := range r.GetAck().GetRanges() {
			for id := rg.First; id <= rg.Last; id++ {
				delete(want, id)
			}
		}
	}
	return infos
}

// errorFor reads responses until the ServiceMessage error about id and
// returns it with the ServiceMessage's credits (nil if none).
func (a *agentConn) errorFor(id uint64) (*sluicev1.MessageError, *sluicev1.Credits) {
	a.t.Helper()
	for {
		r := a.next()
		if e := r.GetInfo().GetError(); e != nil && e.MessageId == id {
			return e, r.GetInfo().GetCredits()
		}
	}
}

func makeBody(recs ...string) []byte {
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add([]byte(r)); err != nil {
			panic(err)
		}
	}
	return bytes.Clone(b.Bytes())
}

func plainReq(id uint64, recs ...string) *sluicev1.Request {
	return &sluicev1.Request{Version: 1, MessageId: id, RecordCount: uint32(len(recs)),
		Payload: &sluicev1.Request_Plain{Plain: makeBody(recs...)}}
}
