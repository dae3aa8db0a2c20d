package rsocket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// echo is the test responder: the models as `sluice rsocket serve` has them.
type echo struct {
	fnf, push atomic.Int64
	got       chan string // fnf and push data, for tests to wait on
	cancelled chan struct{}
}

func newEcho() *echo { return &echo{got: make(chan string, 16), cancelled: make(chan struct{}, 16)} }

func (e *echo) RequestResponse(_ context.Context, p Payload) (Payload, error) {
	if m, ok := strings.CutPrefix(string(p.Data), "error:"); ok {
		return Payload{}, ApplicationError("%s", m)
	}
	return p, nil
}
func (e *echo) FireAndForget(_ context.Context, p Payload) { e.fnf.Add(1); e.got <- string(p.Data) }
func (e *echo) MetadataPush(_ context.Context, md []byte)  { e.push.Add(1); e.got <- string(md) }
func (e *echo) RequestStream(ctx context.Context, p Payload, out *Sink) error {
	n, err := strconv.Atoi(string(p.Data))
	if err != nil {
		return ApplicationError("not a number: %q", p.Data)
	}
	for i := 0; i < n; i++ {
		if err := out.Send(Payload{Data: []byte(strconv.Itoa(i))}); err != nil {
			e.cancelled <- struct{}{}
			return err
		}
	}
	return nil
}
func (e *echo) RequestChannel(ctx context.Context, p Payload, in *Stream, out *Sink) error {
	if err := out.Send(p); err != nil {
		return err
	}
	for {
		q, err := in.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := out.Send(q); err != nil {
			return err
		}
	}
}

// pair connects a client to an echo server over the named transport.
func pair(t testing.TB, transport string, opts ...Option) (*Conn, *echo) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := newEcho()
	var c *Conn
	var err error
	switch transport {
	case "mem":
		a, b := net.Pipe()
		if _, err := ServeConn(ctx, b, e, opts...); err != nil {
			t.Fatal(err)
		}
		c, err = ClientConn(ctx, a, opts...)
	case "tcp":
		ln, _, lerr := Listen("tcp://127.0.0.1:0")
		if lerr != nil {
			t.Fatal(lerr)
		}
		go Serve(ctx, ln, e, opts...)
		c, err = Dial(ctx, "tcp://"+ln.Addr().String(), opts...)
	case "ws":
		ln, path, lerr := Listen("ws://127.0.0.1:0/rsocket")
		if lerr != nil {
			t.Fatal(lerr)
		}
		go ServeWebSocket(ctx, ln, path, e, opts...)
		c, err = Dial(ctx, "ws://"+ln.Addr().String()+path, opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, e
}

var transports = []string{"mem", "tcp", "ws"}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func collect(t *testing.T, s *Stream) []string {
	t.Helper()
	var got []string
	for {
		p, err := s.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("after %d: %v", len(got), err)
		}
		got = append(got, string(p.Data))
	}
}

func seq(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d,", i)
	}
	return b.String()
}

func TestModels(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c, e := pair(t, tr)
			ctx := tctx(t)
			// request-response
			p, err := c.RequestResponse(ctx, Payload{Metadata: []byte("md"), Data: []byte("hello")})
			if err != nil || string(p.Data) != "hello" || string(p.Metadata) != "md" {
				t.Fatalf("rr: %q %q %v", p.Data, p.Metadata, err)
			}
			// error
			_, err = c.RequestResponse(ctx, Payload{Data: []byte("error:boom")})
			var re *Error
			if !errors.As(err, &re) || re.Code != frame.ErrorCodeApplicationError || re.Message != "boom" {
				t.Fatalf("error: %v", err)
			}
			// fire-and-forget and metadata push
			if err := c.FireAndForget(ctx, Payload{Data: []byte("f")}); err != nil {
				t.Fatal(err)
			}
			if err := c.MetadataPush(ctx, []byte("m")); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				select {
				case <-e.got:
				case <-ctx.Done():
					t.Fatal("fnf/push not received")
				}
			}
			if e.fnf.Load() != 1 || e.push.Load() != 1 {
				t.Fatalf("fnf %d push %d", e.fnf.Load(), e.push.Load())
			}
			// stream in batches of 3 credits
			s, err := c.RequestStream(ctx, Payload{Data: []byte("100")}, 3)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(collect(t, s), ",") + ","; got != seq(100) {
				t.Fatalf("stream: %s", got)
			}
			// stream error
			s, _ = c.RequestStream(ctx, Payload{Data: []byte("x")}, 3)
			if _, err := s.Next(); !errors.As(err, &re) || re.Code != frame.ErrorCodeApplicationError {
				t.Fatalf("stream error: %v", err)
			}
			// channel
			ch, err := c.RequestChannel(ctx, Payload{Data: []byte("a")}, 2)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for _, d := range []string{"b", "c", "d", "e"} {
					if err := ch.Send(Payload{Data: []byte(d)}); err != nil {
						t.Error(err)
						return
					}
				}
				ch.Complete()
			}()
			if got := strings.Join(collect(t, &ch.Stream), ""); got != "abcde" {
				t.Fatalf("channel: %q", got)
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c, e := pair(t, tr)
			ctx := tctx(t)
			sctx, cancel := context.WithCancel(ctx)
			s, err := c.RequestStream(sctx, Payload{Data: []byte("1000000")}, 2)
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if _, err := s.Next(); err != nil {
					t.Fatal(err)
				}
			}
			cancel() // → CANCEL: the responder's Send fails
			select {
			case <-e.cancelled:
			case <-ctx.Done():
				t.Fatal("responder never saw the cancel")
			}
			if _, err := s.Next(); err == nil {
				t.Fatal("Next after cancel succeeded")
			}
			// The connection still works.
			if _, err := c.RequestResponse(ctx, Payload{Data: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLargePayloadFragmented(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c, _ := pair(t, tr, WithMaxFrameSize(1<<20)) // default MaxPayloadSize (64 MiB)
			big := bytes.Repeat([]byte("0123456789abcdef"), 20<<20/16)
			p, err := c.RequestResponse(tctx(t), Payload{Data: big})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Data, big) {
				t.Fatalf("got %d bytes back", len(p.Data))
			}
		})
	}
}

func TestConcurrentRequests(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c, _ := pair(t, tr)
			ctx := tctx(t)
			var wg sync.WaitGroup
			errs := make(chan error, 1000)
			for i := range 1000 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want := strconv.Itoa(i)
					p, err := c.RequestResponse(ctx, Payload{Data: []byte(want)})
					if err == nil && string(p.Data) != want {
						err = fmt.Errorf("got %q want %q", p.Data, want)
					}
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

func TestServerRequestsClient(t *testing.T) {
	a, b := net.Pipe()
	ctx := tctx(t)
	got := make(chan *Conn, 1)
	if _, err := ServeConn(ctx, b, newEcho(), WithOnConnect(func(c *Conn) { got <- c })); err != nil {
		t.Fatal(err)
	}
	c, err := ClientConn(ctx, a, WithResponder(newEcho()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("x")}); err != nil { // SETUP reaches the server
		t.Fatal(err)
	}
	srv := <-got
	p, err := srv.RequestResponse(ctx, Payload{Data: []byte("from server")})
	if err != nil || string(p.Data) != "from server" {
		t.Fatalf("%q %v", p.Data, err)
	}
}

func TestLease(t *testing.T) {
	c, _ := pair(t, "mem", WithLease(10*time.Second, 1000))
	if _, err := c.RequestResponse(tctx(t), Payload{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	// A server without lease refuses a client asking for it, with
	// UNSUPPORTED_SETUP (issue 22 item 7: it was REJECTED_SETUP, which
	// "Connection Establishment" does not allow here).
	a, b := net.Pipe()
	ctx := tctx(t)
	ServeConn(ctx, b, newEcho())
	c2, err := ClientConn(ctx, a, WithLease(time.Second, 10))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c2.RequestResponse(ctx, Payload{Data: []byte("x")})
	if err == nil {
		t.Fatal("request on a refused lease connection succeeded")
	}
	<-c2.Done()
	if !strings.Contains(fmt.Sprint(c2.Err()), "UNSUPPORTED_SETUP") {
		t.Fatalf("closed with %v", c2.Err())
	}
}

func TestPeerGoneFailsRequests(t *testing.T) {
	a, b := net.Pipe()
	ctx := tctx(t)
	block := make(chan struct{})
	ServeConn(ctx, b, blocker{block})
	c, err := ClientConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer close(block)
	res := make(chan error, 1)
	go func() { _, err := c.RequestResponse(ctx, Payload{Data: []byte("x")}); res <- err }()
	// Wait until the request is outstanding, then cut the transport.
	for i := 0; i < 6000; i++ {
		n := 0
		c.do(func() error { n = c.machine.NumStreams(); return nil })
		if n == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Close()
	if err := <-res; err == nil {
		t.Fatal("request survived a dead connection")
	}
	<-c.Done()
}

type blocker struct{ ch chan struct{} }

func (b blocker) RequestResponse(ctx context.Context, p Payload) (Payload, error) {
	select {
	case <-b.ch:
	case <-ctx.Done():
	}
	return p, nil
}
func (blocker) FireAndForget(context.Context, Payload)                        {}
func (blocker) MetadataPush(context.Context, []byte)                          {}
func (blocker) RequestStream(context.Context, Payload, *Sink) error           { return nil }
func (blocker) RequestChannel(context.Context, Payload, *Stream, *Sink) error { return nil }

// A fire-and-forget sent right before Close reaches the responder: the
// writer flushes before closing, and the reader's EOF is ordered after the
// frames before it.
func TestFireAndForgetBeforeClose(t *testing.T) {
	for _, tr := range []string{"tcp", "ws"} {
		t.Run(tr, func(t *testing.T) {
			ctx := tctx(t)
			e := newEcho()
			e.got = make(chan string, 100)
			ln, path, err := Listen(tr + "://127.0.0.1:0/rsocket")
			if err != nil {
				t.Fatal(err)
			}
			u := tr + "://" + ln.Addr().String()
			if tr == "ws" {
				go ServeWebSocket(ctx, ln, path, e)
				u += path
			} else {
				go Serve(ctx, ln, e)
			}
			const n = 50
			for i := range n {
				c, err := Dial(ctx, u)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.FireAndForget(ctx, Payload{Data: []byte(strconv.Itoa(i))}); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			for i := range n {
				select {
				case <-e.got:
				case <-time.After(30 * time.Second):
					t.Fatalf("only %d of %d fire-and-forget requests arrived", i, n)
				}
			}
		})
	}
}

// gate is a responder whose fire-and-forget handlers block until released.
type gate struct {
	UnimplementedResponder
	release          chan struct{}
	running, maxSeen atomic.Int64
	finished         atomic.Int64
}

func (g *gate) FireAndForget(context.Context, Payload) {
	n := g.running.Add(1)
	for {
		m := g.maxSeen.Load()
		if n <= m || g.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	<-g.release
	g.running.Add(-1)
	g.finished.Add(1)
}

// A flood of fire-and-forget requests runs at most maxOneway handlers at
// once (they keep no stream, so MaxStreams does not bound them).
func TestFireAndForgetFloodBounded(t *testing.T) {
	ctx := tctx(t)
	g := &gate{release: make(chan struct{})}
	a, b := net.Pipe()
	if _, err := ServeConn(ctx, b, g); err != nil {
		t.Fatal(err)
	}
	c, err := ClientConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = maxOneway + 200
	for range n {
		if err := c.FireAndForget(ctx, Payload{Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for g.running.Load() < maxOneway {
		if ctx.Err() != nil {
			t.Fatalf("only %d handlers started", g.running.Load())
		}
		time.Sleep(time.Millisecond)
	}
	close(g.release)
	for g.finished.Load() < n {
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d handlers ran", g.finished.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	if m := g.maxSeen.Load(); m > maxOneway {
		t.Fatalf("%d handlers ran at once, bound %d", m, maxOneway)
	}
}

// Garbage from a peer closes its connection (ERROR then close), without
// touching the server's other connections.
func TestGarbageClosesConnection(t *testing.T) {
	ctx := tctx(t)
	ln, _, err := Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go Serve(ctx, ln, newEcho())
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte{0, 0, 5, 0xde, 0xad, 0xbe, 0xef, 0x00})
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(raw); err != nil {
		t.Fatalf("server did not close the connection: %v", err)
	}
	c, err := Dial(ctx, "tcp://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(ctx, "udp://x"); err == nil {
		t.Fatal("udp URL accepted")
	}
}

// A server that accepts bytes and never answers: the client's max
// lifetime expires, the connection closes and the outstanding call fails.
func TestSilentPeerKeepaliveTimeout(t *testing.T) {
	ctx := tctx(t)
	a, b := net.Pipe()
	go io.Copy(io.Discard, b)
	defer b.Close()
	c, err := ClientConn(ctx, a, WithKeepalive(10*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("x")}); err == nil {
		t.Fatal("request to a silent peer succeeded")
	}
	<-c.Done()
	if !errors.Is(c.Err(), conn.ErrKeepaliveTimeout) {
		t.Fatalf("closed with %v", c.Err())
	}
}

type panicky struct{ UnimplementedResponder }

func (panicky) RequestResponse(context.Context, Payload) (Payload, error) { panic("bad handler") }

// A panicking handler answers APPLICATION_ERROR; the connection lives on.
func TestHandlerPanic(t *testing.T) {
	ctx := tctx(t)
	a, b := net.Pipe()
	ServeConn(ctx, b, panicky{})
	c, err := ClientConn(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		_, err := c.RequestResponse(ctx, Payload{})
		var re *Error
		if !errors.As(err, &re) || re.Code != frame.ErrorCodeApplicationError || !strings.Contains(re.Message, "bad handler") {
			t.Fatalf("got %v", err)
		}
	}
}

// TestChannelErrorEndsNext: a requester that ends its channel with
// Sink.Error has its Next end with that error, on every transport.
// Before, the stream left the connection's map without waking Next,
// which waited for ever.
func TestChannelErrorEndsNext(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c, _ := pair(t, tr)
			ch, err := c.RequestChannel(tctx(t), Payload{Data: []byte("a")}, 4)
			if err != nil {
				t.Fatal(err)
			}
			if p, err := ch.Next(); err != nil || string(p.Data) != "a" {
				t.Fatalf("first echo: %q, %v", p.Data, err)
			}
			bad := errors.New("stdin broke")
			if err := ch.Error(bad); err != nil {
				t.Fatal(err)
			}
			if _, err := ch.Next(); !errors.Is(err, bad) {
				t.Fatalf("Next after Error: %v, want %v", err, bad)
			}
		})
	}
}
