package rsocket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// rawFrame length-prefixes one frame (an encoder's result).
func rawFrame(f []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	out, err := frame.AppendLengthPrefix(nil, len(f))
	if err != nil {
		panic(err)
	}
	return append(out, f...)
}

// rawSetup writes a client's SETUP on nc.
func rawSetup(t testing.TB, nc net.Conn) {
	t.Helper()
	if _, err := nc.Write(rawSetupFrame(t)); err != nil {
		t.Fatal(err)
	}
}

// neverReader is a raw client that writes frames and reads nothing.
type neverReader struct {
	written atomic.Int64 // frames written
	done    chan error   // the writer's end: nil when all were written
}

// floodFrames writes the frames next(i), i < n, on nc from a goroutine.
func floodFrames(t testing.TB, nc net.Conn, n int, next func(i int) []byte) *neverReader {
	r := &neverReader{done: make(chan error, 1)}
	go func() {
		for i := range n {
			if _, err := nc.Write(next(i)); err != nil {
				r.done <- err
				return
			}
			r.written.Add(1)
		}
		r.done <- nil
	}()
	return r
}

// waitStopped polls until srv stops reading for want of outbound room
// (true), or the flood was written whole or failed (false), recording
// the most output srv had queued meanwhile.
func waitStopped(ctx context.Context, t testing.TB, srv *Conn, r *neverReader, maxQueued *int) bool {
	t.Helper()
	for {
		*maxQueued = max(*maxQueued, srv.QueuedOutbound())
		if srv.ReadingStopped() {
			*maxQueued = max(*maxQueued, srv.QueuedOutbound())
			return true
		}
		select {
		case err := <-r.done:
			t.Logf("flood ended (err %v) after %d frames", err, r.written.Load())
			return false
		case <-ctx.Done():
			t.Fatalf("server neither stopped reading nor read the flood (%d frames written)", r.written.Load())
		case <-time.After(time.Millisecond):
		}
	}
}

// A peer that sends KEEPALIVEs with R and large data and never reads the
// echoes: the server queues at most its outbound budget plus one frame,
// then stops reading (the client's writes block), instead of buffering
// every echo (measured before: 200 such frames of 1 MiB, 752 MB RSS).
func TestOutboundBudgetKeepaliveFlood(t *testing.T) {
	ctx := tctx(t)
	const budget, size, n = 64 << 10, 16 << 10, 512 // 8 MiB of echoes against a 64 KiB budget
	a, b := net.Pipe()
	defer a.Close()
	srv, err := ServeConn(ctx, b, newEcho(), WithOutboundBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	rawSetup(t, a)
	ka := rawFrame(frame.AppendKeepalive(nil, true, 0, make([]byte, size)))
	r := floodFrames(t, a, n, func(int) []byte { return ka })
	maxQ := 0
	stopped := waitStopped(ctx, t, srv, r, &maxQ)
	if lim := budget + len(ka); maxQ > lim {
		t.Fatalf("server queued %d bytes for a peer that does not read; budget %d plus one frame is %d", maxQ, budget, lim)
	}
	if !stopped {
		t.Fatalf("the server read the whole flood (%d frames)", r.written.Load())
	}
	if w := r.written.Load(); w >= n {
		t.Fatalf("the client wrote all %d frames: the server did not stop reading", w)
	}
	a.Close()
	select {
	case <-srv.Done():
	case <-ctx.Done():
		t.Fatal("the server connection did not close after the client went")
	}
}

// A peer that sends request-responses and never reads the answers: the
// answers queue up to the budget (plus the answers racing the check),
// then the server stops reading (before: heap 511 MB). Pooled handlers
// answer from their goroutines, inline ones from the reader.
func TestOutboundBudgetUnreadRequests(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			ctx := tctx(t)
			const budget, size, n = 64 << 10, 4 << 10, 4096 // 16 MiB of answers
			a, b := net.Pipe()
			defer a.Close()
			opts := []Option{WithOutboundBudget(budget)}
			if inline {
				opts = append(opts, WithInlineHandlers())
			}
			srv, err := ServeConn(ctx, b, newEcho(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			rawSetup(t, a)
			data := make([]byte, size)
			r := floodFrames(t, a, n, func(i int) []byte {
				return rawFrame(frame.AppendRequestResponse(nil, uint32(2*i+1), 0, nil, data))
			})
			maxQ := 0
			stopped := waitStopped(ctx, t, srv, r, &maxQ)
			// Answers checked against the budget at once may all pass: allow a
			// few dozen beyond it (the unbounded version queued megabytes).
			if lim := budget + 64*(size+64); maxQ > lim {
				t.Fatalf("server queued %d bytes of answers for a peer that does not read; want at most %d", maxQ, lim)
			}
			if !stopped || r.written.Load() >= n {
				t.Fatalf("the server read the whole flood (%d frames)", r.written.Load())
			}
			a.Close()
			select {
			case <-srv.Done():
			case <-ctx.Done():
				t.Fatal("the server connection did not close after the client went")
			}
		})
	}
}

// A stream handler whose requester granted every credit and reads
// nothing: Send waits for the budget instead of queueing the stream.
func TestOutboundBudgetUnreadStream(t *testing.T) {
	ctx := tctx(t)
	const budget, size = 64 << 10, 4 << 10
	sent := make(chan int, 1)
	h := streamFunc(func(ctx context.Context, out *Sink) error {
		n := 0
		defer func() { sent <- n }()
		for range 4096 { // 16 MiB
			if err := out.Send(Payload{Data: make([]byte, size)}); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	a, b := net.Pipe()
	defer a.Close()
	srv, err := ServeConn(ctx, b, h, WithOutboundBudget(budget))
	if err != nil {
		t.Fatal(err)
	}
	rawSetup(t, a)
	if _, err := a.Write(rawFrame(frame.AppendRequestStream(nil, 1, 0, frame.MaxRequestN, nil, []byte("go")))); err != nil {
		t.Fatal(err)
	}
	maxQ := 0
	for srv.SendersWaiting() == 0 { // the handler waits for room
		maxQ = max(maxQ, srv.QueuedOutbound())
		select {
		case n := <-sent:
			t.Fatalf("the handler sent all %d elements to a peer that reads nothing (queued %d)", n, maxQ)
		case <-ctx.Done():
			t.Fatalf("the handler never waited (queued %d)", srv.QueuedOutbound())
		case <-time.After(time.Millisecond):
		}
	}
	maxQ = max(maxQ, srv.QueuedOutbound())
	if lim := budget + size + 64; maxQ > lim {
		t.Fatalf("stream queued %d bytes; want at most the budget plus one element, %d", maxQ, lim)
	}
	a.Close()
	select {
	case <-srv.Done():
	case <-ctx.Done():
		t.Fatal("the server connection did not close after the client went")
	}
	select {
	case n := <-sent:
		t.Logf("handler ended after %d elements", n)
	case <-ctx.Done():
		t.Fatal("the stream handler did not end with the connection")
	}
}

type streamFunc func(ctx context.Context, out *Sink) error

func (streamFunc) RequestResponse(context.Context, Payload) (Payload, error) {
	return Payload{}, errUnimplemented
}
func (streamFunc) FireAndForget(context.Context, Payload) {}
func (streamFunc) MetadataPush(context.Context, []byte)   {}
func (f streamFunc) RequestStream(ctx context.Context, _ Payload, out *Sink) error {
	return f(ctx, out)
}
func (streamFunc) RequestChannel(context.Context, Payload, *Stream, *Sink) error {
	return errUnimplemented
}

// A peer that stops reading while the server has output for it is
// dropped once it accepted no byte for the write timeout: the transport
// closes, Done closes, Err is ErrWriteTimeout.
func TestWriteTimeoutClosesStalledPeer(t *testing.T) {
	ctx := tctx(t)
	a, b := net.Pipe() // no buffer: the first unread byte blocks the writer
	defer a.Close()
	srv, err := ServeConn(ctx, b, newEcho(), WithWriteTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rawSetup(t, a)
	if _, err := a.Write(rawFrame(frame.AppendKeepalive(nil, true, 0, []byte("ping")))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Done():
	case <-ctx.Done():
		t.Fatal("a peer that never reads kept the connection open")
	}
	if !errors.Is(srv.Err(), ErrWriteTimeout) {
		t.Fatalf("Err() = %v, want ErrWriteTimeout", srv.Err())
	}
}

// Over TCP: a flood of unread KEEPALIVE echoes on one connection, and
// the same server keeps answering a well-behaved client meanwhile; the
// flooding connection is closed by the write timeout.
func TestOutboundBudgetOthersServed(t *testing.T) {
	ctx := tctx(t)
	ln, _, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan *Conn, 4)
	go Serve(ctx, ln, newEcho(), WithOutboundBudget(64<<10), WithWriteTimeout(200*time.Millisecond),
		WithOnConnect(func(c *Conn) { conns <- c }))
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rawSetup(t, raw)
	hostile := <-conns
	ka := rawFrame(frame.AppendKeepalive(nil, true, 0, make([]byte, 256<<10)))
	r := floodFrames(t, raw, 1024, func(int) []byte { return ka }) // 256 MiB, far beyond the socket buffers
	c, err := Dial(ctx, "tcp://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; ; i++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		p, err := c.RequestResponse(rctx, Payload{Data: fmt.Appendf(nil, "hi %d", i)})
		cancel()
		if err != nil || string(p.Data) != fmt.Sprintf("hi %d", i) {
			t.Fatalf("well-behaved client, request %d: %q, %v", i, p.Data, err)
		}
		select {
		case <-hostile.Done():
		default:
			continue
		}
		break
	}
	if !errors.Is(hostile.Err(), ErrWriteTimeout) {
		t.Fatalf("flooding connection ended with %v, want ErrWriteTimeout", hostile.Err())
	}
	if w := r.written.Load(); w >= 1024 {
		t.Fatalf("the server read the whole flood")
	}
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("after")}); err != nil {
		t.Fatalf("after the flooder was dropped: %v", err)
	}
}

// keepaliveFloods serves k connections sharing the budget shared, each
// sent n KEEPALIVE(R) frames of size bytes by a peer that never reads.
func keepaliveFloods(ctx context.Context, t *testing.T, shared *outBudget, k, n, size int) ([]*Conn, []*neverReader) {
	var srvs []*Conn
	var floods []*neverReader
	for range k {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close() })
		srv, err := ServeConn(ctx, b, newEcho(), withOutBudget(shared))
		if err != nil {
			t.Fatal(err)
		}
		srvs = append(srvs, srv)
		rawSetup(t, a)
		ka := rawFrame(frame.AppendKeepalive(nil, true, 0, make([]byte, size)))
		floods = append(floods, floodFrames(t, a, n, func(int) []byte { return ka }))
	}
	return srvs, floods
}

// The server-wide budget: connections sharing it (as those of one Serve
// do) together queue at most the budget plus about one frame each, though
// each alone stays far below its own budget.
func TestServerOutboundBudget(t *testing.T) {
	ctx := tctx(t)
	const limit, size, n, k = 256 << 10, 16 << 10, 512, 4
	shared := newOutBudget(limit)
	srvs, floods := keepaliveFloods(ctx, t, shared, k, n, size)
	total := func() int {
		s := 0
		for _, srv := range srvs {
			s += srv.QueuedOutbound()
		}
		return s
	}
	maxTotal := 0
	for {
		maxTotal = max(maxTotal, total())
		stopped := 0
		for _, srv := range srvs {
			if srv.ReadingStopped() {
				stopped++
			}
		}
		if stopped == k {
			break
		}
		for _, f := range floods {
			if f.written.Load() >= n {
				t.Fatalf("a connection read its whole flood; queued %d across the server", total())
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("only %d of %d connections stopped reading", stopped, k)
		case <-time.After(time.Millisecond):
		}
	}
	maxTotal = max(maxTotal, total())
	if lim := limit + k*2*(size+16); maxTotal > lim {
		t.Fatalf("connections queued %d bytes together; server budget %d, want at most %d", maxTotal, limit, lim)
	}
	mem := 0
	for _, srv := range srvs {
		mem += srv.OutputMemory()
	}
	if got := shared.total.Load(); got < int64(mem) {
		t.Fatalf("shared counter %d, connections' output memory %d", got, mem)
	}
}

// The budgets count the memory holding the output, not only its bytes: a
// queue of large frames grows into pooled buffers with room to spare (a
// quarter more, rounded up to a size class), and that room is memory no
// one else can use. Counting bytes let 100 flooding connections hold a
// fifth more than the server's budget (issue 22).
func TestServerBudgetCountsQueueMemory(t *testing.T) {
	ctx := tctx(t)
	const limit, size, n, k = 1 << 20, 80 << 10, 256, 4 // frames above keepOut: pooled queues
	shared := newOutBudget(limit)
	srvs, floods := keepaliveFloods(ctx, t, shared, k, n, size)
	for {
		stopped := 0
		for _, srv := range srvs {
			if srv.ReadingStopped() || srv.WaitingForServerBudget() {
				stopped++
			}
		}
		if stopped == k {
			break
		}
		for _, f := range floods {
			if f.written.Load() >= n {
				t.Fatal("a connection read its whole flood")
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("only %d of %d connections stopped reading", stopped, k)
		case <-time.After(time.Millisecond):
		}
	}
	mem := 0
	for _, srv := range srvs {
		mem += srv.OutputMemory()
	}
	if counted := shared.total.Load(); counted < int64(mem) {
		t.Fatalf("the server's budget counts %d bytes; the output queues hold %d", counted, mem)
	}
	if lim := limit + k*2*(size+16); mem > lim {
		t.Fatalf("the output queues hold %d bytes; server budget %d, want at most %d", mem, limit, lim)
	}
}

// onewayBack's fire-and-forget handler waits for the gate, then calls
// back into its connection: a METADATA_PUSH and a fire-and-forget to the
// peer, which need the connection's lock.
type onewayBack struct {
	UnimplementedResponder
	srv               atomic.Pointer[Conn]
	gate              chan struct{}
	running, finished atomic.Int64
}

func (h *onewayBack) RequestResponse(_ context.Context, p Payload) (Payload, error) { return p, nil }

func (h *onewayBack) FireAndForget(ctx context.Context, _ Payload) {
	h.running.Add(1)
	<-h.gate
	c := h.srv.Load()
	_ = c.MetadataPush(ctx, []byte("back"))
	_ = c.FireAndForget(ctx, Payload{Data: []byte("back")})
	h.finished.Add(1)
}

// counter counts what a client receives.
type counter struct {
	UnimplementedResponder
	fnf, push atomic.Int64
}

func (c *counter) FireAndForget(context.Context, Payload) { c.fnf.Add(1) }
func (c *counter) MetadataPush(context.Context, []byte)   { c.push.Add(1) }

// More fire-and-forgets than the oneway pool holds, whose handlers call
// back into the connection: the reader used to wait for a pool slot while
// holding the connection's lock, which the running handlers needed to
// finish (1,024 started, 0 finished, the connection wedged for good). Now
// a full pool stops reading without the lock: every handler finishes,
// later requests are answered, and the connection closes.
func TestOnewayHandlersCallBack(t *testing.T) {
	ctx := tctx(t)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second) // fail, not hang, when wedged
	defer cancel()
	const n = maxOneway + 50
	h := &onewayBack{gate: make(chan struct{})}
	a, b := net.Pipe()
	srv, err := ServeConn(ctx, b, h)
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Store(srv)
	got := &counter{}
	c, err := ClientConn(ctx, a, WithResponder(got))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range n {
		if err := c.FireAndForget(ctx, Payload{Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for h.running.Load() < maxOneway {
		if wctx.Err() != nil {
			t.Fatalf("only %d handlers started", h.running.Load())
		}
		time.Sleep(time.Millisecond)
	}
	close(h.gate)
	for h.finished.Load() < n || got.push.Load() < n || got.fnf.Load() < n {
		if wctx.Err() != nil {
			t.Fatalf("%d of %d handlers finished (%d started); the client got %d pushes and %d fire-and-forgets back",
				h.finished.Load(), n, h.running.Load(), got.push.Load(), got.fnf.Load())
		}
		time.Sleep(time.Millisecond)
	}
	p, err := c.RequestResponse(wctx, Payload{Data: []byte("later")})
	if err != nil || string(p.Data) != "later" {
		t.Fatalf("a later request: %q, %v", p.Data, err)
	}
	c.Close()
	select {
	case <-srv.Done():
	case <-wctx.Done():
		t.Fatal("the server connection did not close after the client closed")
	}
}

// Large requests sent at once, each larger than the budget, and echoed:
// the requester's own requests fill its queue, the answers the
// responder's. Only output the peer's frames caused (answers, echoes)
// stops a reader, so the requester keeps reading the answers while its
// requests wait to be written, and neither end waits for the other.
func TestOutboundBudgetLargeBothWays(t *testing.T) {
	ctx := tctx(t)
	for _, network := range []string{"pipe", "tcp"} {
		t.Run(network, func(t *testing.T) {
			var c *Conn
			var err error
			if network == "pipe" {
				a, b := net.Pipe()
				if _, err := ServeConn(ctx, b, newEcho()); err != nil {
					t.Fatal(err)
				}
				c, err = ClientConn(ctx, a)
			} else {
				ln, _, lerr := Listen("tcp://127.0.0.1:0")
				if lerr != nil {
					t.Fatal(lerr)
				}
				go Serve(ctx, ln, newEcho())
				c, err = Dial(ctx, "tcp://"+ln.Addr().String())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second) // below the write timeout: a stall fails here
			defer cancel()
			const n, size = 6, 3 * DefaultOutboundBudget
			errs := make(chan error, n)
			for i := range n {
				go func() {
					data := make([]byte, size)
					data[0] = byte(i)
					p, err := c.RequestResponse(rctx, Payload{Data: data})
					if err == nil && (len(p.Data) != size || p.Data[0] != byte(i)) {
						err = fmt.Errorf("request %d: answer of %d bytes starting %d", i, len(p.Data), p.Data[0])
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Over WebSocket: a client that sends KEEPALIVE(R) messages and never
// reads is held to the budget plus one frame, then dropped by the write
// timeout (its transport is closed at once, without a closing handshake
// that would queue behind the stalled write).
func TestOutboundBudgetWebSocket(t *testing.T) {
	ctx := tctx(t)
	const budget = 64 << 10
	ln, path, err := Listen("ws://127.0.0.1:0/rs")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan *Conn, 1)
	go ServeWebSocket(ctx, ln, path, newEcho(), WithOutboundBudget(budget), WithWriteTimeout(200*time.Millisecond),
		WithOnConnect(func(c *Conn) { conns <- c }))
	ws, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	setup, _ := frame.AppendSetup(nil, frame.Setup{MajorVersion: frame.ProtocolMajor, MinorVersion: frame.ProtocolMinor,
		KeepaliveInterval: 30000, MaxLifetime: 60000, MetadataMIME: []byte("application/octet-stream"), DataMIME: []byte("application/octet-stream")})
	if err := ws.Write(ctx, websocket.MessageBinary, setup); err != nil {
		t.Fatal(err)
	}
	srv := <-conns
	ka, _ := frame.AppendKeepalive(nil, true, 0, make([]byte, 256<<10))
	go func() {
		for range 4096 { // 1 GiB, never read back
			if ws.Write(ctx, websocket.MessageBinary, ka) != nil {
				return
			}
		}
	}()
	maxQ := 0
	for done := false; !done; {
		maxQ = max(maxQ, srv.QueuedOutbound())
		select {
		case <-srv.Done():
			done = true
		case <-ctx.Done():
			t.Fatalf("a WebSocket peer that never reads kept the connection open (queued %d)", srv.QueuedOutbound())
		case <-time.After(time.Millisecond):
		}
	}
	if lim := budget + len(ka) + 16; maxQ > lim {
		t.Fatalf("queued %d bytes for a peer that does not read; want at most %d", maxQ, lim)
	}
	if !errors.Is(srv.Err(), ErrWriteTimeout) {
		t.Fatalf("Err() = %v, want ErrWriteTimeout", srv.Err())
	}
}

// freezeProxy forwards TCP to upstream; its first connection stops
// forwarding toward the client after freezeAfter bytes (the client's
// side stays open: the server's writes stall), the others forward all.
type freezeProxy struct {
	ln       net.Listener
	accepted atomic.Int32
}

func newFreezeProxy(t testing.TB, upstream string, freezeAfter int64) *freezeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			first := p.accepted.Add(1) == 1
			sc, err := net.Dial("tcp", upstream)
			if err != nil {
				cc.Close()
				continue
			}
			t.Cleanup(func() { cc.Close(); sc.Close() })
			go func() { // up: always; its failure (the server reset) closes both
				_, _ = io.Copy(sc, cc)
				cc.Close()
				sc.Close()
			}()
			go func() {
				if first {
					_, _ = io.CopyN(cc, sc, freezeAfter)
					return // frozen: sc is read no more
				}
				_, _ = io.Copy(cc, sc)
				cc.Close()
				sc.Close()
			}()
		}
	}()
	return p
}

// A resumable session whose client stops taking output: the server's
// write timeout drops the transport (not the session), the client
// resumes on a new connection and every answer arrives.
func TestWriteTimeoutResumes(t *testing.T) {
	ctx := tctx(t)
	var logs syncBuffer
	// Both ends retain all 32 MiB for replay: the socket buffers alone
	// hold more than the default 16 MiB behind a frozen client.
	addr, _ := resumeServer(t, "tcp", ResumeConfig{BufferBytes: 64 << 20}, WithWriteTimeout(200*time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	p := newFreezeProxy(t, addr, 1<<20)
	c, err := Dial(ctx, "tcp://"+p.ln.Addr().String(), WithResume(ResumeConfig{BufferBytes: 64 << 20, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n, size = 32, 1 << 20 // 32 MiB each way: beyond the socket buffers
	errs := make(chan error, n)
	for i := range n {
		go func() {
			data := make([]byte, size)
			data[0] = byte(i)
			r, err := c.RequestResponse(ctx, Payload{Data: data})
			if err == nil && (len(r.Data) != size || r.Data[0] != byte(i)) {
				err = fmt.Errorf("request %d: answer of %d bytes starting %d", i, len(r.Data), r.Data[0])
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if p.accepted.Load() < 2 {
		t.Fatalf("the client never redialled (%d connections)", p.accepted.Load())
	}
	if !strings.Contains(logs.String(), "peer accepted no output for the write timeout") {
		t.Fatalf("the server did not drop the stalled transport for the write timeout; its log:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// blockedOneway is a responder whose fire-and-forget and request-response
// handlers wait for release: slow handlers.
type blockedOneway struct {
	UnimplementedResponder
	release chan struct{}
	ran     atomic.Int64
}

func (b *blockedOneway) FireAndForget(context.Context, Payload) { <-b.release; b.ran.Add(1) }
func (b *blockedOneway) RequestResponse(_ context.Context, p Payload) (Payload, error) {
	<-b.release
	b.ran.Add(1)
	return p, nil
}

// Requests whose handlers have not finished count against the budget the
// reader stops on, on the connection and on the server: otherwise a peer
// outruns slow handlers, each holding its request (and then its answer)
// outside every budget. Before: with fire-and-forget handlers that wait,
// the reader read all 4,096 requests of 4 KiB (16 MiB held; the pool
// queues what it cannot start); with request-responses, the answers of
// every handler that had passed the budget check before the queue filled
// (up to 558 KB against a 320 KB bound, depending on the tests run
// before). After the handlers finish and the connection closes, the
// server's total is back at zero.
func TestHeldRequestsCountAgainstBudget(t *testing.T) {
	for _, model := range []string{"fnf", "rr"} {
		t.Run(model, func(t *testing.T) {
			ctx := tctx(t)
			const budget, size, n = 64 << 10, 4 << 10, 4096
			a, b := net.Pipe()
			defer a.Close()
			h := &blockedOneway{release: make(chan struct{})}
			shared := newOutBudget(256 << 10)
			srv, err := ServeConn(ctx, b, h, WithOutboundBudget(budget), withOutBudget(shared))
			if err != nil {
				t.Fatal(err)
			}
			rawSetup(t, a)
			data := make([]byte, size)
			r := floodFrames(t, a, n, func(i int) []byte {
				if model == "fnf" {
					return rawFrame(frame.AppendRequestFNF(nil, uint32(2*i+1), 0, nil, data))
				}
				return rawFrame(frame.AppendRequestResponse(nil, uint32(2*i+1), 0, nil, data))
			})
			maxQ := 0
			if !waitStopped(ctx, t, srv, r, &maxQ) {
				t.Fatalf("the server read the whole flood (%d frames) for handlers that had not finished", r.written.Load())
			}
			// The budget plus the batch the reader held (64 KiB of frames).
			if held, lim := srv.HeldRequests(), budget+(64<<10)+16*(size+64); held > lim {
				t.Fatalf("handlers hold %d bytes of requests; want at most %d", held, lim)
			}
			close(h.release)
			a.Close()
			select {
			case <-srv.Done():
			case <-ctx.Done():
				t.Fatal("the server connection did not close after the client went")
			}
			for shared.total.Load() != 0 || srv.HeldRequests() != 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("after the close the server's total is %d, held %d; want 0", shared.total.Load(), srv.HeldRequests())
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
}

// The frame each connection is reading counts against the server's
// budget, before its body is read: connections flooding large frames
// together hold at most the server budget plus one frame (the overdraw
// slot, readbudget.go) plus a floor each, and a well-behaved client is
// answered meanwhile. Before, each connection read one frame past the
// budget before it stopped: 16 connections of 256 KiB KEEPALIVEs queued
// 16 echoes (4.2 MB) against a 1 MiB budget.
func TestServerBudgetCountsFramesBeingRead(t *testing.T) {
	ctx := tctx(t)
	const limit, size, n, k = 1 << 20, 256 << 10, 64, 16
	shared := newOutBudget(limit)
	srvs, floods := keepaliveFloods(ctx, t, shared, k, n, size)
	maxTotal := int64(0)
	for {
		maxTotal = max(maxTotal, shared.total.Load())
		stopped := 0
		for _, srv := range srvs {
			if srv.ReadingStopped() || srv.WaitingForServerBudget() {
				stopped++
			}
		}
		if stopped == k {
			break
		}
		for _, f := range floods {
			if f.written.Load() >= n {
				t.Fatalf("a connection read its whole flood; the server's total is %d", shared.total.Load())
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("only %d of %d connections stopped reading", stopped, k)
		case <-time.After(time.Millisecond):
		}
	}
	// A well-behaved client on the same server: its small request is read
	// (the floor) and answered while the floods wait.
	a, b := net.Pipe()
	defer a.Close()
	if _, err := ServeConn(ctx, b, newEcho(), withOutBudget(shared)); err != nil {
		t.Fatal(err)
	}
	good, err := ClientConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if p, err := good.RequestResponse(ctx, Payload{Data: []byte("ping")}); err != nil || string(p.Data) != "ping" {
		t.Fatalf("the well-behaved client got %q, %v during the floods", p.Data, err)
	}
	maxTotal = max(maxTotal, shared.total.Load())
	_, frameClass := frame.BufClass(size + 64)
	if lim := int64(limit + frameClass + k*(80<<10)); maxTotal > lim {
		t.Fatalf("the server's total reached %d bytes; budget %d, want at most %d (budget, one frame, 80 KiB a connection)", maxTotal, limit, lim)
	}
}

// A large frame that does not fit what is left of the server's budget
// waits, unread, and is read and answered once the budget frees; a
// small request on another connection is answered meanwhile; a frame
// larger than the whole budget is read (alone) rather than waiting for
// ever. Over TCP and WebSocket, whose message length is not known ahead
// (the reservation grows with the message).
func TestLargeFrameWaitsForServerBudget(t *testing.T) {
	for _, scheme := range []string{"tcp", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			ctx := tctx(t)
			const limit, size = 1 << 20, 512 << 10
			conns := make(chan *Conn, 4)
			u := startBudgetServer(ctx, t, scheme, limit, conns)
			big, err := Dial(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer big.Close()
			srv := <-conns
			shared := srv.opts.sharedOut
			others := int64(limit - 64<<10) // stands for other connections' queued output
			shared.add(others)
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			answered := make(chan error, 1)
			go func() {
				p, err := big.RequestResponse(ctx, Payload{Data: data})
				if err == nil && !bytes.Equal(p.Data, data) {
					err = fmt.Errorf("answer of %d bytes differs from the request", len(p.Data))
				}
				answered <- err
			}()
			for !srv.WaitingForServerBudget() {
				select {
				case err := <-answered:
					t.Fatalf("the large request was read and answered (%v) while the server's budget was full", err)
				case <-ctx.Done():
					t.Fatal("the reader never waited for the server's budget")
				case <-time.After(time.Millisecond):
				}
			}
			small, err := Dial(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer small.Close()
			if p, err := small.RequestResponse(ctx, Payload{Data: []byte("ping")}); err != nil || string(p.Data) != "ping" {
				t.Fatalf("a small request got %q, %v while a large frame waited", p.Data, err)
			}
			select {
			case err := <-answered:
				t.Fatalf("the large request was answered (%v) while the server's budget was full", err)
			default:
			}
			shared.add(-others)
			select {
			case err := <-answered:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("the large request was not read once the budget freed")
			}
			// Larger than the whole budget: read through the overdraw slot.
			huge := bytes.Repeat([]byte{7}, 2*limit)
			if p, err := big.RequestResponse(ctx, Payload{Data: huge}); err != nil || !bytes.Equal(p.Data, huge) {
				t.Fatalf("a frame larger than the server's budget: %d bytes back, %v", len(p.Data), err)
			}
			for shared.total.Load() != 0 || shared.overdraw.Load() {
				select {
				case <-ctx.Done():
					t.Fatalf("after the answers the server's total is %d (overdraw %v); want 0", shared.total.Load(), shared.overdraw.Load())
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
}

// startBudgetServer serves the echo responder over scheme (tcp or ws) on
// loopback with a server budget of limit, sending each connection to
// conns, and returns the URL to dial.
func startBudgetServer(ctx context.Context, t *testing.T, scheme string, limit int, conns chan<- *Conn) string {
	t.Helper()
	u := "tcp://127.0.0.1:0"
	if scheme == "ws" {
		u = "ws://127.0.0.1:0/rs"
	}
	ln, path, err := Listen(u)
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithServerOutboundBudget(int64(limit)), WithOnConnect(func(c *Conn) { conns <- c })}
	if scheme == "ws" {
		go ServeWebSocket(ctx, ln, path, newEcho(), opts...)
		return "ws://" + ln.Addr().String() + path
	}
	go Serve(ctx, ln, newEcho(), opts...)
	return "tcp://" + ln.Addr().String()
}
