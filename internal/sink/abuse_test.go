package sink

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/firstmsg"
)

// TestOutOfWindow: an agent that ignores its credits is told
// OUT_OF_WINDOW and disconnected, instead of being received and buffered;
// what is queued for the storage writer never exceeds the stream's bound.
func TestOutOfWindow(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		const queueBytes = 256 << 10
		hold := make(chan struct{})
		h := newHarness(t, func(c *Config) {
			c.QueueBytes = queueBytes
			c.beforeCommit = func() { <-hold }
		})
		defer close(hold)
		a := h.connect("greedy")
		// The writer is held, so nothing is acked and the credit (256 KiB)
		// is all there is; send 8 MiB anyway, as fast as the stream takes it.
		rec := strings.Repeat("x", 60<<10)
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			for id := uint64(0); id < 128; id++ {
				if err := a.Stream.Send(sinkclient.PlainRequest(id, rec)); err != nil {
					return // the sink ended the stream
				}
			}
		}()
		var sawOutOfWindow bool
		var peak float64
		for done := false; !done; {
			peak = max(peak, metricValue(t, h, "sluice_sink_queued_bytes"))
			select {
			case r, ok := <-a.Resps:
				if !ok {
					done = true
					break
				}
				if e := r.GetInfo().GetError(); e != nil && e.Code == sluicev1.ErrorCode_ERROR_CODE_OUT_OF_WINDOW {
					sawOutOfWindow = true
				}
			case <-time.After(wait):
				t.Fatal("the stream of an agent ignoring its credits did not end")
			}
		}
		if err := <-a.End; status.Code(err) != codes.ResourceExhausted {
			t.Errorf("stream ended with %v, want ResourceExhausted", err)
		}
		if !sawOutOfWindow {
			t.Error("no OUT_OF_WINDOW error before the stream ended")
		}
		if peak > queueBytes {
			t.Errorf("queued bytes reached %v, more than the stream's bound %d", peak, queueBytes)
		}
		if got := metricValue(t, h, "sluice_sink_streams_cut_total{reason=out_of_window}"); got != 1 {
			t.Errorf("streams_cut_total{out_of_window} = %v, want 1", got)
		}
		<-sent
	})
	t.Run("messages", func(t *testing.T) {
		hold := make(chan struct{})
		h := newHarness(t, func(c *Config) {
			c.QueueMessages = 4
			c.beforeCommit = func() { <-hold }
		})
		defer close(hold)
		a := h.connect("greedy")
		for id := range uint64(5) {
			a.Send(sinkclient.PlainRequest(id, "r"))
		}
		if e, _ := a.ErrorFor(4); e.Code != sluicev1.ErrorCode_ERROR_CODE_OUT_OF_WINDOW {
			t.Errorf("fifth message with a message credit of 4: %v, want OUT_OF_WINDOW", e)
		}
		if err := a.Status(); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("stream ended with %v, want ResourceExhausted", err)
		}
	})
}

// TestStreamsPerConnection: streams beyond MaxStreamsPerConn on one
// connection are not served until one of the first ends.
func TestStreamsPerConnection(t *testing.T) {
	const limit, extra = 4, 3
	h := newHarness(t, func(c *Config) { c.MaxStreamsPerConn = limit })
	welcomed := make(chan *sinkclient.Agent, limit+extra)
	var wg sync.WaitGroup
	for i := range limit + extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			stream, err := h.client.Send(ctx)
			if err != nil {
				return // cancelled at the end of the test
			}
			a := &sinkclient.Agent{Stream: stream, Cancel: cancel}
			if err := stream.Send(sinkclient.Hello("edge-" + itoa(uint64(i)))); err != nil {
				return
			}
			if r, err := stream.Recv(); err == nil && r.GetWelcome() != nil {
				welcomed <- a
			}
		}()
	}
	var first []*sinkclient.Agent
	for range limit {
		select {
		case a := <-welcomed:
			first = append(first, a)
		case <-time.After(wait):
			t.Fatalf("only %d of the first %d streams were served", len(first), limit)
		}
	}
	select {
	case <-welcomed:
		t.Fatalf("more than %d streams served on one connection", limit)
	case <-time.After(quiet):
	}
	if got := metricValue(t, h, "sluice_sink_streams{kind=send}"); got != limit {
		t.Errorf("%v send streams open, want %d", got, limit)
	}
	// Ending the first ones lets the others in.
	for _, a := range first {
		a.Cancel()
	}
	for i := range extra {
		select {
		case a := <-welcomed:
			a.Cancel()
		case <-time.After(wait):
			t.Fatalf("only %d of the %d waiting streams were served once the first ended", i, extra)
		}
	}
	wg.Wait()
}

// TestWaitingSendsPerConnection (issue 23): a connection may have
// firstmsg.DefaultMax Send streams waiting for their Hello; the next is
// refused at once with ResourceExhausted (no handler runs for it), and
// counted; a Hello frees a place. Before, each such stream ran a handler
// up to MaxStreamsPerConn (256) per connection: 16,384 goroutines from
// one address, whose records the Go runtime keeps.
func TestWaitingSendsPerConnection(t *testing.T) {
	waiting := make(chan struct{}, 2*firstmsg.DefaultMax)
	h := newHarness(t, func(c *Config) { c.helloWait = func() { waiting <- struct{}{} } })
	var silent []*sinkclient.Agent
	for range firstmsg.DefaultMax {
		silent = append(silent, h.open())
		select {
		case <-waiting:
		case <-time.After(wait):
			t.Fatal("the sink did not start waiting for a Hello")
		}
	}
	over := h.open()
	if err := over.Status(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "first message") {
		t.Fatalf("Send stream beyond the waiting ones: %v, want ResourceExhausted", err)
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=waiting_streams}"); got != 1 {
		t.Errorf("refused_total{waiting_streams} = %v, want 1", got)
	}
	// A Hello on one of them lets the next stream in.
	// (Its responses come through the Agent's pump, the stream's one
	// reader: a second Recv here raced it and, when the pump took the
	// Welcome, waited forever; seen under -race.)
	silent[0].Send(sinkclient.Hello("edge-1"))
	if r := silent[0].Next(); r.GetWelcome() == nil {
		t.Fatalf("Hello answered with %v; want a Welcome", r)
	}
	h.connect("edge-2")
}

// TestConnectionsPerPeer: connections beyond MaxConnsPerPeer from one IP
// that have not passed a Hello are closed at once; one that passes its
// Hello gives its slot back (issue 23: the bound is per agent identity
// from then on), takes it again when its session ends, and gives it
// back for good once closed.
func TestConnectionsPerPeer(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConnsPerPeer = 2 })
	addr := h.cc.Target()
	dial := func() *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	type stream = grpc.BidiStreamingClient[sluicev1.Request, sluicev1.Response]
	// open opens a Send stream (and so the connection) without a Hello.
	open := func(cc *grpc.ClientConn) (stream, context.CancelFunc, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		st, err := sluicev1.NewSinkClient(cc).Send(ctx)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		t.Cleanup(cancel)
		return st, cancel, nil
	}
	hello := func(st stream, agent string) error {
		if err := st.Send(sinkclient.Hello(agent)); err != nil {
			_, err = st.Recv()
			return err
		}
		r, err := st.Recv()
		if err == nil && r.GetWelcome() == nil {
			t.Fatalf("first response %v is not a Welcome", r)
		}
		return err
	}
	// end closes st's sending side and waits for the sink's OK: the
	// session's slot accounting is done before the sink sends its status.
	end := func(st stream) {
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("stream after CloseSend: %v, want its end", err)
		}
	}
	// anon opens a connection that counts: a probe session proves the
	// sink accepted it, then ends, leaving it open with no identity.
	anon := func() *grpc.ClientConn {
		cc := dial()
		st, _, err := open(cc)
		if err != nil {
			t.Fatal(err)
		}
		if err := hello(st, "probe"); err != nil {
			t.Fatalf("a connection under the limit: %v", err)
		}
		end(st) // the connection is anonymous again
		return cc
	}
	// The harness's connection stays unused (not connected).
	first := anon()
	_ = anon()
	// Two anonymous connections: a third is refused.
	third := dial()
	if st, _, err := open(third); err == nil {
		err = hello(st, "edge")
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("third connection from one peer with a limit of 2: %v, want Unavailable", err)
		}
	} else if status.Code(err) != codes.Unavailable {
		t.Fatalf("third connection: %v, want Unavailable", err)
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=conns_per_peer}"); got < 1 {
		t.Errorf("refused_total{conns_per_peer} = %v, want >= 1", got)
	}
	// first proves its identity: it no longer counts, a new connection is
	// served, and its session too.
	st, _, err := open(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := hello(st, "edge-1"); err != nil {
		t.Fatalf("Hello on a counted connection: %v", err)
	}
	if anon, _ := h.s.peers.counts("127.0.0.1"); anon != 1 {
		t.Errorf("anonymous connections = %d after a Hello, want 1", anon)
	}
	fourth := dial()
	st4, _, err := open(fourth)
	if err == nil {
		err = hello(st4, "edge-2")
	}
	if err != nil {
		t.Fatalf("a connection after another one proved its identity: %v", err)
	}
	// first's session ends: it counts again (with fourth identified, two
	// anonymous ones: the second and first).
	end(st)
	if a, _ := h.s.peers.counts("127.0.0.1"); a != 2 {
		t.Fatalf("anonymous connections = %d after first's session ended, want 2", a)
	}
	if st, _, err := open(dial()); err == nil {
		if err = hello(st, "edge"); status.Code(err) != codes.Unavailable {
			t.Fatalf("a connection with two anonymous ones open: %v, want Unavailable", err)
		}
	}
	deadline := time.Now().Add(wait)
	// Closing one gives its slot back; a new connection gets it (retry:
	// the close reaches the sink asynchronously).
	first.Close()
	for {
		st, _, err := open(dial())
		if err == nil {
			err = hello(st, "edge-3")
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection after one closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHelloTimeout: a stream that never sends its Hello (or ReadStart) is
// ended after Config.HelloTimeout, and one still silent at shutdown does
// not hold Close up.
func TestHelloTimeout(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.HelloTimeout = 100 * time.Millisecond })
	a := h.open() // says nothing
	if err := a.Status(); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no Hello") {
		t.Errorf("silent Send stream: %v, want DeadlineExceeded", err)
	}
	r := h.read(nil)
	if err := r.Status(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("silent Read stream: %v, want DeadlineExceeded", err)
	}
	if got := metricValue(t, h, "sluice_sink_streams_cut_total{reason=hello_timeout}"); got != 2 {
		t.Errorf("streams_cut_total{hello_timeout} = %v, want 2", got)
	}

	// With the default timeout, Close ends a silent stream at once.
	waiting := make(chan struct{}, 1)
	h2 := newHarness(t, func(c *Config) {
		c.helloWait = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	})
	b := h2.open()
	select {
	case <-waiting:
	case <-time.After(wait):
		t.Fatal("the sink did not start waiting for the Hello")
	}
	if err := h2.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Status(); !strings.Contains(status.Convert(err).Message(), "shutting down") {
		t.Errorf("silent stream at shutdown: %v, want \"sink is shutting down\"", err)
	}
}

// TestEmptyBatch: a batch without records is refused, not stored.
func TestEmptyBatch(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(1))
	e, _ := a.ErrorFor(1)
	if e.Code != sluicev1.ErrorCode_ERROR_CODE_BAD_PAYLOAD || e.Retryable {
		t.Errorf("empty batch: %v, want a BAD_PAYLOAD that is not retryable", e)
	}
	a.Send(sinkclient.PlainRequest(2, "r"))
	a.Collect(2)
	if got := h.stored(); len(got) != 1 {
		t.Errorf("store holds %v, want only message 2", got)
	}
}

// TestMaxConsumers: Read streams beyond Config.MaxConsumers are refused
// with ResourceExhausted; the consumers gauge counts the others; a
// following consumer that caught up holds no read buffer.
func TestMaxConsumers(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConsumers = 2 })
	a := h.connect("edge-1")
	for id := range uint64(20) {
		a.Send(sinkclient.PlainRequest(id, sinkclient.Records(id, 50)...))
	}
	a.Collect(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
	var readers []*sinkclient.Reader
	for range 2 {
		r := h.read(&sluicev1.ReadStart{Follow: true})
		r.Send(&sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 1000}})
		for r.Next().GetEnd() == nil {
		}
		readers = append(readers, r)
	}
	third := h.read(&sluicev1.ReadStart{Follow: true})
	if err := third.Status(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("third consumer with MaxConsumers 2: %v, want ResourceExhausted", err)
	}
	if got := metricValue(t, h, "sluice_sink_consumers"); got != 2 {
		t.Errorf("consumers gauge %v, want 2", got)
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=max_consumers}"); got != 1 {
		t.Errorf("refused_total{max_consumers} = %v, want 1", got)
	}
	// Both followers caught up and wait: nothing is buffered for them.
	deadline := time.Now().Add(wait)
	for metricValue(t, h, "sluice_sink_consumer_buffered_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("consumer_buffered_bytes %v with every follower caught up, want 0", metricValue(t, h, "sluice_sink_consumer_buffered_bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A follower still gets what is stored next.
	a.Send(sinkclient.PlainRequest(20, "new"))
	a.Collect(20)
	if m := readers[0].Next().GetMessage(); m.GetMessageId() != 20 {
		t.Errorf("follower got %v, want message 20", m)
	}
	// A consumer leaving makes room.
	readers[1].Stream.CloseSend()
	readers[1].Status()
	deadline = time.Now().Add(wait)
	for metricValue(t, h, "sluice_sink_consumers") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("consumers gauge did not drop when a consumer left")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := h.read(&sluicev1.ReadStart{FromOffset: 20})
	r.Request(10)
	if m := r.Next().GetMessage(); m.GetMessageId() != 20 {
		t.Errorf("consumer admitted after one left: got %v, want message 20", m)
	}
	if err := r.Status(); err != nil {
		t.Errorf("consumer admitted after one left: %v", err)
	}
}

// TestFailedAuthStaysCounted (issue 23): a Hello that fails
// authentication does not free its connection from MaxConnsPerPeer; the
// same connection's accepted Hello does.
func TestFailedAuthStaysCounted(t *testing.T) {
	t.Run("token", func(t *testing.T) { failedAuthStaysCounted(t, tokenHarness(t, edgeToken)) })
	t.Run("mtls", func(t *testing.T) {
		// Over TLS the sink finds the connection of a session by the
		// same remote address (stallCreds wraps the peerConn).
		ca := testpki.NewCA(t)
		failedAuthStaysCounted(t, mtlsHarness(t, ca, ca.Issue(t, "edge-1", x509.ExtKeyUsageClientAuth)))
	})
}

func failedAuthStaysCounted(t *testing.T, h *harness) {
	b := h.open()
	b.Send(sinkclient.Hello("edge-2")) // the token is edge-1's
	if err := b.Status(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Hello as another agent: %v, want PermissionDenied", err)
	}
	if anon, open := h.s.peers.counts("127.0.0.1"); anon != 1 || open != 1 {
		t.Errorf("after a refused Hello: %d anonymous of %d open, want 1 of 1", anon, open)
	}
	a := h.connect("edge-1")
	if anon, open := h.s.peers.counts("127.0.0.1"); anon != 0 || open != 1 {
		t.Errorf("after an accepted Hello: %d anonymous of %d open, want 0 of 1", anon, open)
	}
	_ = a
}

// TestMaxConns: Config.MaxConns caps every open connection, those past a
// Hello included (they escape MaxConnsPerPeer); beyond it new ones are
// closed at once, counted as refused_total{max_conns}.
func TestMaxConns(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxConns = 2 })
	addr := h.cc.Target()
	hello := func(agent string) error {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		t.Cleanup(cancel)
		st, err := sluicev1.NewSinkClient(cc).Send(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(sinkclient.Hello(agent)); err != nil {
			_, err = st.Recv()
			return err
		}
		_, err = st.Recv()
		return err
	}
	for _, agent := range []string{"a", "b"} {
		if err := hello(agent); err != nil {
			t.Fatalf("agent %s: %v", agent, err)
		}
	}
	if err := hello("c"); status.Code(err) != codes.Unavailable {
		t.Fatalf("a third connection with MaxConns 2: %v, want Unavailable", err)
	}
	if got := metricValue(t, h, "sluice_sink_refused_total{reason=max_conns}"); got < 1 {
		t.Errorf("refused_total{max_conns} = %v, want >= 1", got)
	}
}

// addrConn is a net.Conn with given addresses (nothing else is used).
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestIdentifiedNamesBothEnds: a session frees the connection named by
// both its ends, not another connection from the same client address and
// port to another listener of the sink (RSocket, a second gRPC one).
func TestIdentifiedNamesBothEnds(t *testing.T) {
	tab := newPeerTable(nil, 2, 10)
	remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 40000}
	grpcSide := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7000}
	other := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 7001}
	if _, ok := tab.admit(addrConn{local: grpcSide, remote: remote}); !ok {
		t.Fatal("first connection refused")
	}
	done := tab.identified(protocol.PeerInfo{Addr: remote.String(), Local: other.String()})
	if anon, _ := tab.counts("10.0.0.7"); anon != 1 {
		t.Errorf("a session on another listener freed the connection: %d anonymous, want 1", anon)
	}
	done()
	done = tab.identified(protocol.PeerInfo{Addr: remote.String(), Local: grpcSide.String()})
	if anon, _ := tab.counts("10.0.0.7"); anon != 0 {
		t.Errorf("its own session: %d anonymous, want 0", anon)
	}
	done()
	done() // once only
	if anon, open := tab.counts("10.0.0.7"); anon != 1 || open != 1 {
		t.Errorf("after the session: %d anonymous of %d open, want 1 of 1", anon, open)
	}
}
