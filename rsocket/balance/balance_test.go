package balance_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/balance"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// slowEcho is the echo responder with a delay before each response. It
// embeds the interface so that echo's NonBlocking marker is not promoted
// (the delay would then run on the reader and serialize the connection).
type slowEcho struct {
	rsocket.Responder
	delay time.Duration
}

func (s slowEcho) RequestResponse(ctx context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	out, err := s.Responder.RequestResponse(ctx, p) // counted on arrival
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return rsocket.Payload{}, ctx.Err()
	}
	return out, err
}

// server is an in-process echo server that can be killed (listener and
// every connection closed at once, as if the process died) and restarted
// on the same address.
type server struct {
	t     *testing.T
	addr  string
	delay time.Duration
	opts  []rsocket.Option // for rsocket.Serve
	n     atomic.Int64     // requests served, across restarts

	mu     sync.Mutex
	cancel context.CancelFunc
	conns  []net.Conn
	ln     net.Listener
}

type trackLn struct {
	net.Listener
	s *server
}

func (l trackLn) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.conns = append(l.s.conns, c)
		l.s.mu.Unlock()
	}
	return c, err
}

func startServer(t *testing.T, delay time.Duration) *server {
	s := &server{t: t, addr: "127.0.0.1:0", delay: delay}
	s.start()
	t.Cleanup(s.kill)
	return s
}

// startLeaseServer is an echo server that grants each connection count
// requests per LEASE.
func startLeaseServer(t *testing.T, count uint32) *server {
	s := &server{t: t, addr: "127.0.0.1:0", opts: []rsocket.Option{rsocket.WithLease(time.Minute, count)}}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func (s *server) url() string { return "tcp://" + s.addr }

func (s *server) start() {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	e := &echo.Responder{Hooks: echo.Hooks{Request: func(string) { s.n.Add(1) }}}
	var r rsocket.Responder = e
	if s.delay > 0 {
		r = slowEcho{Responder: e, delay: s.delay}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.cancel, s.ln, s.conns = cancel, ln, nil
	s.mu.Unlock()
	go rsocket.Serve(ctx, trackLn{ln, s}, r, s.opts...)
}

func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return
	}
	s.ln.Close()
	for _, c := range s.conns {
		c.Close()
	}
	s.cancel()
	s.cancel = nil
}

// load runs workers closed-loop idempotent request-responses until stop is
// closed, counting successes and failures.
type load struct {
	ok, failed atomic.Int64
	firstErr   atomic.Pointer[error] // not atomic.Value: errors of different types would panic it
	wg         sync.WaitGroup
	stop       chan struct{}
}

func startLoad(c *balance.Client, workers int) *load {
	l := &load{stop: make(chan struct{})}
	ctx := balance.Idempotent(context.Background())
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-l.stop:
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				want := fmt.Sprintf("%d-%d", w, k)
				p, err := c.RequestResponse(rctx, rsocket.Payload{Data: []byte(want)})
				cancel()
				if err == nil && string(p.Data) != want {
					err = fmt.Errorf("got %q, want %q", p.Data, want)
				}
				if err != nil {
					l.failed.Add(1)
					l.firstErr.CompareAndSwap(nil, &err)
				} else {
					l.ok.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

// first is the first failure, nil if none.
func (l *load) first() error {
	if p := l.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

func dialAll(t *testing.T, ss []*server, opts ...balance.Option) *balance.Client {
	urls := make([]string, len(ss))
	for i, s := range ss {
		urls[i] = s.url()
	}
	c, err := balance.Dial(context.Background(), urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSlowServerGetsLittleTraffic(t *testing.T) {
	ss := []*server{startServer(t, 0), startServer(t, 20*time.Millisecond), startServer(t, 0)}
	c := dialAll(t, ss, balance.WithSeed(1))
	l := startLoad(c, 16)
	testwait.For(t, "3000 responses", func() bool { return l.ok.Load() >= 3000 })
	l.end()
	if f := l.failed.Load(); f > 0 {
		t.Fatalf("%d requests failed: %v", f, l.first())
	}
	total := ss[0].n.Load() + ss[1].n.Load() + ss[2].n.Load()
	share := float64(ss[1].n.Load()) / float64(total)
	t.Logf("served: %d %d %d (slow share %.1f%%)", ss[0].n.Load(), ss[1].n.Load(), ss[2].n.Load(), share*100)
	if share >= 0.10 {
		t.Fatalf("slow server got %.1f%% of %d requests, want < 10%%", share*100, total)
	}
}

// A server whose LEASE allows no request is skipped: every request goes to
// the one that allows them, none waits for a lease that never comes.
func TestServerWithoutLeaseIsSkipped(t *testing.T) {
	ss := []*server{startLeaseServer(t, 0), startLeaseServer(t, 1_000_000)}
	c := dialAll(t, ss, balance.WithSeed(3), balance.WithConnOptions(rsocket.WithLease(time.Minute, 1_000_000)))
	// A request sent to the server without lease would wait for a LEASE
	// forever: the deadline turns that into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Until the first LEASE arrives no server may take a request.
	testwait.For(t, "a server with a lease", func() bool {
		_, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("x")})
		return err == nil
	})
	for i := 0; i < 500; i++ {
		if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("x")}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := ss[0].n.Load(); n != 0 {
		t.Fatalf("the server without lease served %d requests", n)
	}
	if n := ss[1].n.Load(); n != 501 {
		t.Fatalf("the leased server served %d requests, want 501", n)
	}
}

func TestKillAndRestartServer(t *testing.T) {
	ss := []*server{startServer(t, 0), startServer(t, 0), startServer(t, 0)}
	c := dialAll(t, ss, balance.WithSeed(2))
	l := startLoad(c, 16)
	testwait.For(t, "traffic on every server", func() bool {
		return ss[0].n.Load() > 100 && ss[1].n.Load() > 100 && ss[2].n.Load() > 100
	})

	ss[1].kill()
	testwait.For(t, "the balancer to mark the killed server down", func() bool { return !c.Stats()[1].Up })
	after := l.ok.Load()
	testwait.For(t, "1000 responses without the killed server", func() bool { return l.ok.Load() >= after+1000 })
	if f := l.failed.Load(); f > 0 {
		t.Fatalf("%d idempotent requests failed after a server died: %v", f, l.first())
	}

	before := ss[1].n.Load()
	ss[1].start() // same address
	testwait.For(t, "the restarted server to get traffic", func() bool { return ss[1].n.Load() > before+100 })
	l.end()
	if f := l.failed.Load(); f > 0 {
		t.Fatalf("%d requests failed: %v", f, l.first())
	}
	t.Logf("ok %d; served %d %d %d", l.ok.Load(), ss[0].n.Load(), ss[1].n.Load(), ss[2].n.Load())
}

func TestNotIdempotentIsNotRetried(t *testing.T) {
	ss := []*server{startServer(t, time.Hour)}
	c := dialAll(t, ss)
	errc := make(chan error, 1)
	go func() {
		_, err := c.RequestResponse(context.Background(), rsocket.Payload{Data: []byte("x")})
		errc <- err
	}()
	testwait.For(t, "the request to reach the server", func() bool { return ss[0].n.Load() == 1 })
	ss[0].kill()
	if err := <-errc; err == nil {
		t.Fatal("request on a dead connection succeeded")
	}
	if n := ss[0].n.Load(); n != 1 {
		t.Fatalf("server saw %d requests, want 1", n)
	}
}

func TestDialNoServer(t *testing.T) {
	if _, err := balance.Dial(context.Background(), nil); err == nil {
		t.Fatal("no URL: want an error")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := balance.Dial(ctx, []string{"tcp://" + addr}); err == nil {
		t.Fatal("unreachable server: want an error")
	}
}

func TestOtherModels(t *testing.T) {
	ss := []*server{startServer(t, 0), startServer(t, 0)}
	c := dialAll(t, ss)
	ctx := context.Background()
	s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("3")}, 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p, err := s.Next()
		if err != nil || string(p.Data) != fmt.Sprint(i) {
			t.Fatalf("stream element %d: %q %v", i, p.Data, err)
		}
	}
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("a")}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := ch.Next(); err != nil || string(p.Data) != "a" {
		t.Fatalf("channel: %q %v", p.Data, err)
	}
	ch.Complete()
	if err := c.FireAndForget(ctx, rsocket.Payload{Data: []byte("f")}); err != nil {
		t.Fatal(err)
	}
	if err := c.MetadataPush(ctx, []byte("m")); err != nil {
		t.Fatal(err)
	}
}
