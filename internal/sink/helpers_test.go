package sink

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// wait bounds every blocking step of a test: generous, so that a loaded
// machine slows a test down instead of failing it. Nothing waits for it
// to pass unless the test is failing.
const wait = sinkclient.Wait

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
	served *sinkclient.Served
	cc     *grpc.ClientConn
	client sluicev1.SinkClient
	logs   *syncbuf.Buffer
	dial   []grpc.DialOption
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncbuf.Buffer{}}
	h.cfg = Config{
		DataDir: t.TempDir(),
		Logger:  sinkclient.Logger(h.logs),
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
	h.s = s
	h.served = sinkclient.Serve(h.t, s, func(lis net.Listener) error { return grpcserve.Serve(s.Serving(), lis) }, h.dial...)
	h.cc, h.client = h.served.CC, h.served.Client
}

func (h *harness) stop() {
	if h.s == nil {
		return
	}
	h.served.Stop(h.t)
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

// open opens a raw Send stream without a Hello: the test plays the
// agent.
func (h *harness) open() *sinkclient.Agent {
	h.t.Helper()
	return sinkclient.OpenAgent(h.t, h.client)
}

// connect opens a Send stream and completes the handshake.
func (h *harness) connect(agent string, dicts ...uint32) *sinkclient.Agent {
	h.t.Helper()
	return sinkclient.ConnectAgent(h.t, h.client, agent, dicts...)
}
