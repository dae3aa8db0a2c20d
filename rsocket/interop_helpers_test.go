package rsocket_test

// Helpers shared by the interop tests against the Python, JavaScript and
// Java peers.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// frameMeter follows the 24-bit length prefixes of one direction of a TCP
// connection and keeps the largest frame seen, so the large-payload cases
// can show that both ends fragmented (no frame over 1 MiB).
type frameMeter struct {
	mu      sync.Mutex
	hdr     []byte
	left    int // bytes of the current frame still to come
	max     int
	nFrames int
}

func (m *frameMeter) feed(b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(b) > 0 {
		if m.left > 0 {
			k := min(m.left, len(b))
			m.left -= k
			b = b[k:]
			continue
		}
		m.hdr = append(m.hdr, b[0])
		b = b[1:]
		if len(m.hdr) == 3 {
			m.left = int(m.hdr[0])<<16 | int(m.hdr[1])<<8 | int(m.hdr[2])
			m.max = max(m.max, m.left)
			m.nFrames++
			m.hdr = m.hdr[:0]
		}
	}
}

func (m *frameMeter) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("%d frames, largest %d bytes", m.nFrames, m.max)
}

func (m *frameMeter) largest() int { m.mu.Lock(); defer m.mu.Unlock(); return m.max }

// meteredConn measures the frames read (from the peer) and written (ours).
type meteredConn struct {
	net.Conn
	in, out *frameMeter
}

func (c meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.in.feed(b[:n])
	return n, err
}

func (c meteredConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.out.feed(b[:n])
	return n, err
}

// meteredListener wraps every accepted connection in a meteredConn with
// meters of its own (the prefix parser follows one byte stream each).
type meteredListener struct {
	net.Listener
	mu      sync.Mutex
	in, out []*frameMeter
}

func (l *meteredListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	in, out := &frameMeter{}, &frameMeter{}
	l.mu.Lock()
	l.in, l.out = append(l.in, in), append(l.out, out)
	l.mu.Unlock()
	return meteredConn{c, in, out}, nil
}

// summary: frames and the largest frame over all connections, each way.
func (l *meteredListener) summary() (in, out *frameMeter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := func(ms []*frameMeter) *frameMeter {
		var t frameMeter
		for _, m := range ms {
			m.mu.Lock()
			t.nFrames += m.nFrames
			t.max = max(t.max, m.max)
			m.mu.Unlock()
		}
		return &t
	}
	return sum(l.in), sum(l.out)
}

// largest: the largest frame over all connections, each way.
func (l *meteredListener) largest() (in, out int) {
	i, o := l.summary()
	return i.max, o.max
}

// collect reads a stream to its end.
func collect(s *rsocket.Stream) ([]string, error) {
	var got []string
	for len(got) < 1000 {
		p, err := s.Next()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(p.Data))
	}
	return got, errors.New("more than 1000 elements")
}

// concurrentEchoes sends n request-responses at once on c, each with its
// own data, and checks that every answer is its own request's echo.
func concurrentEchoes(t *testing.T, ctx context.Context, c *rsocket.Conn, n int) string {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := "r" + strconv.Itoa(i)
			p, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte(d)})
			if err == nil && string(p.Data) != d {
				err = fmt.Errorf("asked %q, got %q", d, p.Data)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("%d of %d failed, first: %v", len(errs)+1, n, err)
	}
	return fmt.Sprintf("%d request-responses in flight on one connection, all answered", n)
}

// serveResumableEcho serves the echo responder with resumption on a tr
// ("tcp" or "ws") listener of loopback; stop ends the server and waits
// for it (ctx's end ends it too).
func serveResumableEcho(t *testing.T, ctx context.Context, tr string) (addr, path string, stop func()) {
	t.Helper()
	ln, path, err := rsocket.Listen(tr + "://127.0.0.1:0/rs")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if tr == "ws" {
			_ = rsocket.ServeWebSocket(sctx, ln, path, &echo.Responder{}, rsocket.WithResume(rsocket.ResumeConfig{}))
		} else {
			_ = rsocket.Serve(sctx, ln, &echo.Responder{}, rsocket.WithResume(rsocket.ResumeConfig{}))
		}
	}()
	return ln.Addr().String(), path, func() { cancel(); <-done }
}

// wantApplicationError asks the peer's echo responder for "error:boom" and
// fails t unless the answer is APPLICATION_ERROR "boom", which it returns.
func wantApplicationError(t *testing.T, ctx context.Context, c *rsocket.Conn) error {
	t.Helper()
	_, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("error:boom")})
	var e *rsocket.Error
	if !errors.As(err, &e) || e.Code != frame.ErrorCodeApplicationError || e.Message != "boom" {
		t.Fatalf("got %v, want APPLICATION_ERROR boom", err)
	}
	return err
}

// takeFiveThenCancel asks the peer for a stream of a million elements with
// 5 credits, checks the five, and cancels: the peer then reports how many
// its generator made.
func takeFiveThenCancel(t *testing.T, ctx context.Context, c *rsocket.Conn) {
	t.Helper()
	s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("1000000")}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if p, err := s.Next(); err != nil || string(p.Data) != strconv.Itoa(i) {
			t.Fatalf("element %d: %q, %v", i, p.Data, err)
		}
	}
	s.Cancel()
}
