package rr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// Client is one protocol's client: Call sends payload and returns the
// reply. It is safe for concurrent use.
type Client interface {
	Call(ctx context.Context, payload []byte) ([]byte, error)
	Close() error
}

// DialOptions shape a client the way its users would for a load.
type DialOptions struct {
	// Conns bounds the connections of pooled protocols (http1; resp's
	// go-redis gets it as redispeer's --conns);
	// 0 means the library's default (the setup of "Request-Response
	// Olympics").
	Conns int
}

// Protocol is one contestant: an echo server and its client.
type Protocol struct {
	Name string
	// Serve starts an echo server on 127.0.0.1 and returns its address
	// and a stop function. Nil when the server is a peer's (rsocket-go,
	// redcon; see Peers): then it is always run by the caller in the
	// peer's own process.
	Serve func(ctx context.Context) (addr string, stop func(), err error)
	// Dial is nil when the client is a peer's too: the peer drives the
	// load itself.
	Dial func(ctx context.Context, addr string, o DialOptions) (Client, error)
}

// Protocols lists the contestants in table order.
var Protocols = []Protocol{
	{"http1", serveHTTP(false), dialHTTP(false)},
	{"h2c", serveHTTP(true), dialHTTP(true)},
	{"grpc-unary", serveGRPC, dialGRPCUnary},
	{"grpc-stream", serveGRPC, dialGRPCStream},
	// The Redis rows run as interop/redis/cmd/redispeer, a module of its
	// own (see Peers): resp is redcon's server with go-redis, one
	// connection per request in flight; resp-pipelined redcon with rueidis
	// auto-pipelining on one connection; redis and redis-pipelined the
	// same two clients against a real redis-server, which the bench starts
	// (skipped when it is not installed).
	{"resp", nil, nil},
	{"resp-pipelined", nil, nil},
	{"redis", serveRedis, nil},
	{"redis-pipelined", serveRedis, nil},
	// tcp is the physical limit: length-prefixed echo on one connection,
	// every queued request and reply coalesced into one write on both
	// ends (the server answers all requests that arrived together in one
	// write; the client's writer goroutine, as sluice's RSocket writer,
	// writes everything queued since its last write). tcp-naive
	// has the same server and a client that writes once per request (what
	// the olympics ran as "tcp" before).
	{"tcp", serveTCP, dialTCPCoalesced},
	{"tcp-naive", serveTCP, dialTCP},
	{"rsocket", serveRSocket, dialRSocket("tcp://")},
	{"rsocket-ws", serveRSocketWS, dialRSocket("ws://")},
	// rsocket-go runs as interop/rsocket-go/cmd/rrpeer, its own module:
	// "rsocket-go" is its client (blocking Block, a goroutine per request
	// in flight, like every client here) and server (Dial nil: the peer
	// drives the load itself), "rsocket-go-async" the same with its async
	// SubscribeWith client (closed loop only), "rsocket-go-server" its
	// server with sluice's client.
	{"rsocket-go", nil, nil},
	{"rsocket-go-async", nil, nil},
	{"rsocket-go-server", nil, dialRSocket("tcp://")},
}

// Lookup returns the protocol called name.
func Lookup(name string) (Protocol, bool) {
	for _, p := range Protocols {
		if p.Name == name {
			return p, true
		}
	}
	return Protocol{}, false
}

// ProtocolNames is every name, comma-separated.
func ProtocolNames() string {
	var n []string
	for _, p := range Protocols {
		n = append(n, p.Name)
	}
	return strings.Join(n, ",")
}

func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// ---- HTTP/1.1 and h2c ----

func serveHTTP(h2c bool) func(context.Context) (string, func(), error) {
	return func(ctx context.Context) (string, func(), error) {
		ln, err := listen()
		if err != nil {
			return "", nil, err
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Write(b)
		})}
		if h2c {
			srv.Protocols = new(http.Protocols)
			srv.Protocols.SetUnencryptedHTTP2(true)
		}
		go srv.Serve(ln)
		return ln.Addr().String(), func() { srv.Close() }, nil
	}
}

type httpClient struct {
	c   *http.Client
	url string
}

func dialHTTP(h2c bool) func(context.Context, string, DialOptions) (Client, error) {
	return func(_ context.Context, addr string, o DialOptions) (Client, error) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if o.Conns > 0 {
			tr.MaxIdleConnsPerHost = o.Conns
			tr.MaxConnsPerHost = o.Conns
		}
		if h2c {
			// One connection, multiplexed: HTTP/2 without TLS only.
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
			tr.MaxConnsPerHost = 0
		}
		return &httpClient{c: &http.Client{Transport: tr}, url: "http://" + addr + "/echo"}, nil
	}
}

func (h *httpClient) Call(ctx context.Context, p []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(p))
	if err != nil {
		return nil, err
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("http status %d", resp.StatusCode)
	}
	return b, err
}

func (h *httpClient) Close() error { h.c.CloseIdleConnections(); return nil }

// ---- gRPC: a hand-written service over protobuf's BytesValue ----

// grpcBufferSize is the read and write buffer of both ends in grpc-go's
// own throughput benchmark workers (benchmark/worker/benchmark_client.go
// and benchmark_server.go in github.com/grpc/grpc-go: 128 KiB).
const grpcBufferSize = 128 << 10

// GRPCServerOptions configure a gRPC server as grpc-go's own benchmarks do
// for throughput: 128 KiB read and write buffers (benchmark/worker). The
// shared write buffer that benchmark/benchmain turns on
// (-sharedWriteBuffer, on by default) is grpc-go 1.85's default, its
// option deprecated; MaxConcurrentStreams, which benchmain sets to its
// calls + 1, is left at grpc-go's default (unlimited), which is no lower.
// Used by `bench rr` and `bench rsocket`.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ReadBufferSize(grpcBufferSize), grpc.WriteBufferSize(grpcBufferSize)}
}

// GRPCDialOptions are GRPCServerOptions' client side, plaintext.
func GRPCDialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithReadBufferSize(grpcBufferSize), grpc.WithWriteBufferSize(grpcBufferSize)}
}

const grpcService = "sluice.bench.Echo"

var grpcDesc = grpc.ServiceDesc{
	ServiceName: grpcService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		return in, nil
	}}},
	// Stream echoes every message; the client matches replies by the
	// request id in the first 8 bytes, as the stream of "Request-Response
	// Olympics" did.
	Streams: []grpc.StreamDesc{{StreamName: "Stream", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
		for {
			in := new(wrapperspb.BytesValue)
			if err := st.RecvMsg(in); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if err := st.SendMsg(in); err != nil {
				return err
			}
		}
	}}},
}

func serveGRPC(ctx context.Context) (string, func(), error) {
	ln, err := listen()
	if err != nil {
		return "", nil, err
	}
	s := grpc.NewServer(GRPCServerOptions()...)
	s.RegisterService(&grpcDesc, struct{}{})
	go s.Serve(ln)
	return ln.Addr().String(), s.Stop, nil
}

type grpcUnary struct{ cc *grpc.ClientConn }

func dialGRPCUnary(_ context.Context, addr string, _ DialOptions) (Client, error) {
	cc, err := grpc.NewClient(addr, GRPCDialOptions()...)
	if err != nil {
		return nil, err
	}
	return &grpcUnary{cc}, nil
}

func (g *grpcUnary) Call(ctx context.Context, p []byte) ([]byte, error) {
	out := new(wrapperspb.BytesValue)
	err := g.cc.Invoke(ctx, "/"+grpcService+"/Call", wrapperspb.Bytes(p), out)
	return out.GetValue(), err
}

func (g *grpcUnary) Close() error { return g.cc.Close() }

// pending matches replies to requests by id.
type pending struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]chan []byte
	err  error
}

func (p *pending) add() (uint64, chan []byte, error) {
	ch := make(chan []byte, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, nil, p.err
	}
	p.next++
	p.m[p.next] = ch
	return p.next, ch, nil
}

func (p *pending) done(id uint64, b []byte) {
	p.mu.Lock()
	ch := p.m[id]
	delete(p.m, id)
	p.mu.Unlock()
	if ch != nil {
		ch <- b
	}
}

func (p *pending) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	for id, ch := range p.m {
		close(ch)
		delete(p.m, id)
	}
}

func (p *pending) forget(id uint64) {
	p.mu.Lock()
	delete(p.m, id)
	p.mu.Unlock()
}

func (p *pending) wait(ctx context.Context, id uint64, ch chan []byte) ([]byte, error) {
	select {
	case b, ok := <-ch:
		if !ok {
			p.mu.Lock()
			err := p.err
			p.mu.Unlock()
			return nil, err
		}
		return b, nil
	case <-ctx.Done():
		p.forget(id)
		return nil, ctx.Err()
	}
}

type grpcStream struct {
	cc     *grpc.ClientConn
	st     grpc.ClientStream
	cancel context.CancelFunc
	sendMu sync.Mutex
	p      pending
}

func dialGRPCStream(ctx context.Context, addr string, _ DialOptions) (Client, error) {
	cc, err := grpc.NewClient(addr, GRPCDialOptions()...)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st, err := cc.NewStream(sctx, &grpcDesc.Streams[0], "/"+grpcService+"/Stream")
	if err != nil {
		cancel()
		cc.Close()
		return nil, err
	}
	g := &grpcStream{cc: cc, st: st, cancel: cancel, p: pending{m: map[uint64]chan []byte{}}}
	go func() {
		for {
			in := new(wrapperspb.BytesValue)
			if err := st.RecvMsg(in); err != nil {
				g.p.fail(fmt.Errorf("grpc stream: %w", err))
				return
			}
			if len(in.Value) < 8 {
				g.p.fail(errors.New("grpc stream: reply without request id"))
				return
			}
			g.p.done(binary.BigEndian.Uint64(in.Value), in.Value[8:])
		}
	}()
	return g, nil
}

func (g *grpcStream) Call(ctx context.Context, p []byte) ([]byte, error) {
	id, ch, err := g.p.add()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 8+len(p))
	binary.BigEndian.PutUint64(b, id)
	copy(b[8:], p)
	g.sendMu.Lock()
	err = g.st.SendMsg(wrapperspb.Bytes(b))
	g.sendMu.Unlock()
	if err != nil {
		g.p.forget(id)
		return nil, err
	}
	return g.p.wait(ctx, id, ch)
}

func (g *grpcStream) Close() error { g.cancel(); return g.cc.Close() }

// ---- raw TCP, naive: 4-byte big-endian length prefix, replies in order,
// one write syscall per request on the client ----

func serveTCP(ctx context.Context) (string, func(), error) {
	ln, err := listen()
	if err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go echoTCP(c)
		}
	}()
	return ln.Addr().String(), func() { ln.Close() }, nil
}

const maxTCPFrame = 16 << 20

func echoTCP(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	var hdr [4]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxTCPFrame {
			return
		}
		buf = append(buf[:0], make([]byte, n)...)
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		w.Write(hdr[:])
		w.Write(buf)
		// Coalesce replies while more requests are already buffered: all
		// replies to requests that arrived together go out in one write.
		if r.Buffered() == 0 {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// tcpClient pipelines requests on one connection: the server answers in
// order, so replies are matched first in, first out.
type tcpClient struct {
	c     net.Conn
	mu    sync.Mutex // writes and queue order together
	queue chan chan []byte
	err   chan struct{}
}

func dialTCP(ctx context.Context, addr string, _ DialOptions) (Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &tcpClient{c: c, queue: make(chan chan []byte, 1<<16), err: make(chan struct{})}
	go t.read()
	return t, nil
}

func (t *tcpClient) read() { readReplies(t.c, t.queue, t.err) }

// readReplies hands each length-prefixed reply read from c to the
// caller waiting longest in queue (replies come in request order), and
// closes done when c ends or misbehaves.
func readReplies(c io.Reader, queue chan chan []byte, done chan struct{}) {
	defer close(done)
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxTCPFrame {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		select {
		case ch := <-queue:
			ch <- b
		default:
			return // a reply nobody asked for
		}
	}
}

func (t *tcpClient) Call(ctx context.Context, p []byte) ([]byte, error) {
	if len(p) > maxTCPFrame {
		return nil, errors.New("tcp: payload too large")
	}
	ch := make(chan []byte, 1)
	b := make([]byte, 4+len(p))
	binary.BigEndian.PutUint32(b, uint32(len(p)))
	copy(b[4:], p)
	t.mu.Lock()
	t.queue <- ch
	_, err := t.c.Write(b)
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-t.err:
		return nil, errors.New("tcp: connection closed")
	case <-ctx.Done():
		// The reply will still come and be dropped into ch's buffer.
		return nil, ctx.Err()
	}
}

func (t *tcpClient) Close() error { return t.c.Close() }

// ---- raw TCP, coalesced: the limit any protocol on TCP can approach ----

// coalescer is one connection's writing side, built as sluice's RSocket
// connection writes (rsocket/write.go): callers append whole frames under
// mu and never write; one writer goroutine, woken when frames wait and it
// is idle, first yields (runtime.Gosched) so that every caller ready to
// run queues its frame, then writes everything queued in one write, again
// until nothing is. An earlier version let the first caller that found no
// write under way write itself: under 128 callers each woken caller then
// wrote its own frame, a syscall per request on both ends, and sluice's
// RSocket did 1.4× that "limit" (olympics of 2026-11-28, closed loop).
type coalescer struct {
	c       net.Conn
	mu      sync.Mutex
	out     []byte // frames not yet taken by the writer
	spare   []byte // the writer's last buffer, reused
	writing bool   // the writer holds or is about to take a batch
	failed  bool   // a write failed: the connection is done
	wake    chan struct{}
	done    chan struct{} // closed by close: the writer ends
	closed  chan struct{} // closed when a write fails
}

func newCoalescer(c net.Conn) *coalescer {
	w := &coalescer{c: c, wake: make(chan struct{}, 1), done: make(chan struct{}), closed: make(chan struct{})}
	go w.writeLoop()
	return w
}

// frame queues one length-prefixed frame for the writer; before, if not
// nil, runs under the same lock (the client queues the reply's channel
// in write order).
func (w *coalescer) frame(p []byte, before func()) {
	w.mu.Lock()
	if before != nil {
		before()
	}
	w.out = binary.BigEndian.AppendUint32(w.out, uint32(len(p)))
	w.out = append(w.out, p...)
	wake := !w.writing && !w.failed
	w.writing = true
	w.mu.Unlock()
	if wake {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// writeLoop writes what callers queued, every frame queued during a write
// in the next one.
func (w *coalescer) writeLoop() {
	for {
		select {
		case <-w.wake:
		case <-w.done:
			return
		}
		for {
			runtime.Gosched() // let ready callers queue their frames first
			w.mu.Lock()
			if len(w.out) == 0 {
				w.writing = false
				w.mu.Unlock()
				break
			}
			buf := w.out
			w.out = w.spare[:0]
			w.mu.Unlock()
			_, err := w.c.Write(buf)
			w.mu.Lock()
			w.spare = buf
			if err != nil {
				w.failed = true
				w.out = nil
				close(w.closed)
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
		}
	}
}

// close ends the writer and the connection.
func (w *coalescer) close() error {
	close(w.done)
	return w.c.Close()
}

// tcpCoalesced pipelines requests on one connection through a coalescer;
// the server answers in order, so replies are matched first in, first out.
type tcpCoalesced struct {
	w     *coalescer
	queue chan chan []byte
	err   chan struct{}
}

func dialTCPCoalesced(ctx context.Context, addr string, _ DialOptions) (Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &tcpCoalesced{w: newCoalescer(c), queue: make(chan chan []byte, 1<<16), err: make(chan struct{})}
	go t.read()
	return t, nil
}

func (t *tcpCoalesced) read() { readReplies(t.w.c, t.queue, t.err) }

func (t *tcpCoalesced) Call(ctx context.Context, p []byte) ([]byte, error) {
	if len(p) > maxTCPFrame {
		return nil, errors.New("tcp: payload too large")
	}
	ch := make(chan []byte, 1)
	t.w.frame(p, func() { t.queue <- ch })
	select {
	case r := <-ch:
		return r, nil
	case <-t.err:
		return nil, errors.New("tcp: connection closed")
	case <-t.w.closed:
		return nil, errors.New("tcp: write failed")
	case <-ctx.Done():
		// The reply will still come and be dropped into ch's buffer.
		return nil, ctx.Err()
	}
}

func (t *tcpCoalesced) Close() error { return t.w.close() }

// ---- sluice RSocket over TCP and WebSocket ----

func serveRSocket(ctx context.Context) (string, func(), error) {
	ln, err := listen()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go rsocket.Serve(ctx, ln, &echo.Responder{})
	return ln.Addr().String(), cancel, nil
}

func serveRSocketWS(ctx context.Context) (string, func(), error) {
	ln, err := listen()
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go rsocket.ServeWebSocket(ctx, ln, "/", &echo.Responder{})
	return ln.Addr().String() + "/", cancel, nil
}

type rsClient struct{ c *rsocket.Conn }

func dialRSocket(scheme string) func(context.Context, string, DialOptions) (Client, error) {
	return func(ctx context.Context, addr string, _ DialOptions) (Client, error) {
		c, err := rsocket.Dial(ctx, scheme+addr)
		if err != nil {
			return nil, err
		}
		return &rsClient{c}, nil
	}
}

func (r *rsClient) Call(ctx context.Context, p []byte) ([]byte, error) {
	out, err := r.c.RequestResponse(ctx, rsocket.Payload{Data: p})
	return out.Data, err
}

func (r *rsClient) Close() error { return r.c.Close() }
