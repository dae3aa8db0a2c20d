package rsocket

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
	"github.com/sluicehq/sluice/rsocket/internal/resumetest"
)

// resumeServer serves newEcho with resumption on a tcp:// or ws:// URL
// and returns the listener's address and the URL path.
func resumeServer(t testing.TB, scheme string, cfg ResumeConfig, opts ...Option) (addr, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, path, err := Listen(scheme + "://127.0.0.1:0/rs")
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, WithResume(cfg))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if scheme == "ws" {
			_ = ServeWebSocket(ctx, ln, path, newEcho(), opts...)
		} else {
			_ = Serve(ctx, ln, newEcho(), opts...)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String(), path
}

// withinBound is how long within waits.
var withinBound = 60 * time.Second

// within fails the test when f does not return within a generous bound
// (a hang is a failure, not a timing assertion).
func within(t testing.TB, what string, f func()) {
	t.Helper()
	resumetest.Within(t, what, withinBound, f)
}

// readStream reads a stream of "0".."n-1" and checks it is complete, in
// order and without duplicates (rsocket/internal/resumetest).
func readStream(s *Stream, n int) error { return resumetest.ReadAll(itemsOf(s), n) }

// itemsOf is s's next function for resumetest: the items' data.
func itemsOf(s *Stream) func() ([]byte, error) {
	return func() ([]byte, error) {
		p, err := s.Next()
		return p.Data, err
	}
}

// dialResume dials url with resumption and quick redials; the
// connection is closed at the end of the test.
func dialResume(t testing.TB, url string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), url, WithResume(ResumeConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestResumeCuttingProxy: a request-stream of 200,000 items, a channel
// and request-responses, all on one resumable connection through a proxy
// that cuts it 12 times at random byte offsets, arrive complete, in
// order, without duplicates, over TCP and WebSocket.
func TestResumeCuttingProxy(t *testing.T) {
	for _, scheme := range []string{"tcp", "ws"} {
		t.Run(scheme, func(t *testing.T) { cuttingProxyRun(t, scheme) })
	}
}

// TestResumeCuttingProxyByteCredits: TestResumeCuttingProxy with the
// byte-credits extension on both ends (8 KiB windows, so REQUEST_BYTES
// grants flow both ways all the time: the client's for the stream, the
// server's for the channel). The grants count toward the resume positions
// and are replayed like REQUEST_N; before, the sender did not count them
// and the first cut ended the connection with CONNECTION_ERROR ("RESUME_OK
// position … outside the retained …").
func TestResumeCuttingProxyByteCredits(t *testing.T) {
	cuttingProxyRun(t, "tcp", WithByteCredits(8<<10))
}

// cuttingProxyRun is TestResumeCuttingProxy over scheme, with opts on
// both ends.
func cuttingProxyRun(t *testing.T, scheme string, opts ...Option) {
	const items, cuts = 200_000, 12
	addr, path := resumeServer(t, scheme, ResumeConfig{}, opts...)
	// Each cut connection carries at most maxDown bytes to the
	// client and the stream alone is ~3.5 MB: every cut happens
	// before the stream completes.
	p := newCutProxy(t, addr, 14, cuts, 16<<10, 200<<10)
	ctx := context.Background()
	c, err := Dial(ctx, scheme+"://"+p.Addr()+path, append([]Option{WithResume(ResumeConfig{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}),
		WithKeepalive(50*time.Millisecond, 30*time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(3)
	go func() {
		defer wg.Done()
		s, err := c.RequestStream(ctx, Payload{Data: []byte(strconv.Itoa(items))}, 256)
		if err == nil {
			err = readStream(s, items)
		}
		errs <- err
	}()
	go func() {
		defer wg.Done()
		for i := range 2000 {
			want := "rr-" + strconv.Itoa(i)
			r, err := c.RequestResponse(ctx, Payload{Data: []byte(want)})
			if err == nil && string(r.Data) != want {
				err = fmt.Errorf("request-response %d answered %q", i, r.Data)
			}
			if err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		defer wg.Done()
		const n = 5000
		ch, err := c.RequestChannel(ctx, Payload{Data: []byte("0")}, 64)
		if err != nil {
			errs <- err
			return
		}
		go func() {
			for i := 1; i < n; i++ {
				if ch.Send(Payload{Data: []byte(strconv.Itoa(i))}) != nil {
					return
				}
			}
			_ = ch.Complete()
		}()
		errs <- readStream(&ch.Stream, n)
	}()
	within(t, "streams", wg.Wait)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	st := c.ResumeStats()
	if got := p.Cuts(); got != cuts {
		t.Errorf("proxy cut %d times, want %d", got, cuts)
	}
	if st.Lost != cuts || st.Resumed < 1 {
		t.Errorf("client lost %d transports and resumed %d times; want %d lost", st.Lost, st.Resumed, cuts)
	}
	t.Logf("%s: %d cuts, %d resumes, %d connections", scheme, p.Cuts(), st.Resumed, p.Accepted())
}

// rejectedStream opens a 1,000,000-item stream through p and reads it.
// Once 100 items arrived it runs beforeCut, cuts the connection
// (faultproxy.Proxy.CutAll: at a point the test chose, not at a random offset
// the stream may never reach), runs afterCut, and returns the stream's
// error once the connection is gone.
func rejectedStream(t *testing.T, c *Conn, p *faultproxy.Proxy, beforeCut, afterCut func()) error {
	t.Helper()
	s, err := c.RequestStream(context.Background(), Payload{Data: []byte("1000000")}, 1024)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	flowing := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			if i == 100 {
				close(flowing)
			}
			if _, err := s.Next(); err != nil {
				if i < 100 {
					close(flowing)
				}
				errc <- err
				return
			}
		}
	}()
	within(t, "100 items", func() { <-flowing })
	if beforeCut != nil {
		beforeCut()
	}
	p.CutAll()
	if afterCut != nil {
		afterCut()
	}
	var serr error
	within(t, "rejection", func() { serr = <-errc })
	within(t, "close", func() { <-c.Done() })
	return serr
}

// TestResumeRejected: a resume the server cannot honour fails every
// stream with a clear error, closes the connection and is not retried.
func TestResumeRejected(t *testing.T) {
	ckeep := WithKeepalive(time.Hour, time.Hour) // no keepalive trims the server's buffer
	t.Run("buffer too small", func(t *testing.T) {
		addr, _ := resumeServer(t, "tcp", ResumeConfig{BufferBytes: 1024})
		p := newCutProxy(t, addr, 1, 0, 1, 1)
		c, err := Dial(context.Background(), "tcp://"+p.Addr(), WithResume(ResumeConfig{MaxBackoff: 20 * time.Millisecond}), ckeep)
		if err != nil {
			t.Fatal(err)
		}
		// The server's frames stop reaching the client: it falls further
		// behind than the 1 KiB the server retains.
		err = rejectedStream(t, c, p, func() {
			p.Hole(true)
			within(t, "4 KiB lost", func() {
				for p.Holed() < 4096 {
					time.Sleep(time.Millisecond)
				}
			})
			p.Hole(false)
		}, nil)
		checkRejected(t, c, err, "outside the retained")
		if n := p.Accepted(); n != 2 {
			t.Errorf("%d connections, want 2 (one resume attempt, not retried)", n)
		}
	})
	t.Run("unknown token", func(t *testing.T) {
		addr, _ := resumeServer(t, "tcp", ResumeConfig{})
		other, _ := resumeServer(t, "tcp", ResumeConfig{}) // a server that never saw the session
		p := newCutProxy(t, addr, 2, 0, 1, 1)
		c, err := Dial(context.Background(), "tcp://"+p.Addr(), WithResume(ResumeConfig{MaxBackoff: 20 * time.Millisecond}), ckeep)
		if err != nil {
			t.Fatal(err)
		}
		err = rejectedStream(t, c, p, func() { p.SetUpstream(other) }, nil)
		checkRejected(t, c, err, "unknown resume token")
	})
	t.Run("server session expired", func(t *testing.T) {
		store := NewMemoryResumeStore(0).(*memoryStore)
		addr, _ := resumeServer(t, "tcp", ResumeConfig{Store: store, SessionLifetime: 100 * time.Millisecond})
		p := newCutProxy(t, addr, 3, 0, 1, 1)
		c, err := Dial(context.Background(), "tcp://"+p.Addr(), WithResume(ResumeConfig{MaxBackoff: 20 * time.Millisecond}), ckeep)
		if err != nil {
			t.Fatal(err)
		}
		err = rejectedStream(t, c, p, func() { p.Refuse(true) }, func() {
			within(t, "the server to expire the session", func() {
				for store.Len() > 0 {
					time.Sleep(5 * time.Millisecond)
				}
			})
			p.Refuse(false)
		})
		checkRejected(t, c, err, "unknown resume token")
	})
	t.Run("client session expired", func(t *testing.T) {
		addr, _ := resumeServer(t, "tcp", ResumeConfig{})
		p := newCutProxy(t, addr, 4, 0, 1, 1)
		c, err := Dial(context.Background(), "tcp://"+p.Addr(), WithResume(ResumeConfig{SessionLifetime: 100 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}), ckeep)
		if err != nil {
			t.Fatal(err)
		}
		err = rejectedStream(t, c, p, func() { p.Refuse(true) }, nil)
		if !errors.Is(c.Err(), conn.ErrResumeExpired) || err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("stream error %v, connection error %v; want the session expired", err, c.Err())
		}
	})
}

func checkRejected(t *testing.T, c *Conn, err error, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != frame.ErrorCodeRejectedResume || !strings.Contains(e.Message, "resume rejected") || !strings.Contains(e.Message, reason) {
		t.Errorf("stream error %v; want REJECTED_RESUME: resume rejected: …%s…", err, reason)
	}
	if !errors.Is(c.Err(), conn.ErrResumeRejected) {
		t.Errorf("connection error %v; want conn.ErrResumeRejected", c.Err())
	}
}

// TestResumeSetupRejectedWithoutServerResume: a resumable client against a
// server without resumption gets REJECTED_SETUP, not a hang.
func TestResumeSetupRejectedWithoutServerResume(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = Serve(ctx, ln, newEcho()) }()
	c, err := Dial(ctx, "tcp://"+ln.Addr().String(), WithResume(ResumeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RequestResponse(ctx, Payload{Data: []byte("x")})
	within(t, "close", func() { <-c.Done() })
	if err == nil || c.Err() == nil || !strings.Contains(c.Err().Error(), "resum") {
		t.Errorf("request error %v, connection error %v; want the SETUP rejected", err, c.Err())
	}
}

// TestResumeStoreBounded: a server whose store is full rejects further
// resumable SETUPs; a closed session frees its place.
func TestResumeStoreBounded(t *testing.T) {
	store := NewMemoryResumeStore(1).(*memoryStore)
	addr, _ := resumeServer(t, "tcp", ResumeConfig{Store: store})
	ctx := context.Background()
	a, err := Dial(ctx, "tcp://"+addr, WithResume(ResumeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RequestResponse(ctx, Payload{Data: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	b, err := Dial(ctx, "tcp://"+addr, WithResume(ResumeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestResponse(ctx, Payload{Data: []byte("b")}); err == nil || !strings.Contains(err.Error(), "too many resumable sessions") {
		t.Errorf("second session: %v; want too many resumable sessions", err)
	}
	_ = a.Close()
	within(t, "store frees the session", func() {
		for store.Len() > 0 {
			time.Sleep(5 * time.Millisecond)
		}
	})
	c, err := Dial(ctx, "tcp://"+addr, WithResume(ResumeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RequestResponse(ctx, Payload{Data: []byte("c")}); err != nil {
		t.Errorf("after a session closed: %v", err)
	}
}

// TestResumeBehindBalancer: three servers sharing one ResumeStore behind a
// round-robin TCP balancer that also cuts connections: each RESUME lands
// on another server than the one the session's last connection used, and
// the stream still arrives complete, in order, once. (Servers in one
// process share sessions this way; across processes a balancer must route
// a token to its owner: docs/rsocket-resume.md.)
func TestResumeBehindBalancer(t *testing.T) {
	const items, cuts = 200_000, 9
	store := NewMemoryResumeStore(0)
	var backends []string
	for range 3 {
		addr, _ := resumeServer(t, "tcp", ResumeConfig{Store: store})
		backends = append(backends, addr)
	}
	p := newCutProxy(t, backends[0], 31, cuts, 16<<10, 200<<10)
	p.Balance(backends...)
	resumedStream(t, p, items, cuts)
	landed := p.Landed()
	for _, b := range backends {
		if landed[b] < 3 {
			t.Errorf("connections per server %v: want every server to have taken resumes", landed)
		}
	}
}

// resumedStream reads a request-stream of items elements through p with
// resumption on and checks that it arrives complete, in order, once, and
// that the client resumed after each of p's cuts.
func resumedStream(t *testing.T, p *faultproxy.Proxy, items, cuts int) {
	t.Helper()
	resumedStreamAt(t, p, "tcp://"+p.Addr(), items, cuts)
}

// resumedStreamAt is resumedStream dialling url (through p).
func resumedStreamAt(t *testing.T, p *faultproxy.Proxy, url string, items, cuts int) {
	t.Helper()
	ctx := context.Background()
	c := dialResume(t, url)
	s, err := c.RequestStream(ctx, Payload{Data: []byte(strconv.Itoa(items))}, 256)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the stream", func() { err = readStream(s, items) })
	if err != nil {
		t.Fatal(err)
	}
	if got, st := p.Cuts(), c.ResumeStats(); got != cuts || st.Resumed != cuts {
		t.Errorf("the proxy cut %d times and the client resumed %d times, want %d each", got, st.Resumed, cuts)
	}
}

// TestResumeBudgetShared: a server's sessions share MaxRetainedBytes:
// with four sessions each retains at most a quarter of it, however much
// it sent; when three close, the last one's share grows back (to
// BufferBytes at most).
func TestResumeBudgetShared(t *testing.T) {
	const budget, perSession = 512 << 10, 1 << 20
	store := NewMemoryResumeStore(0)
	addr, _ := resumeServer(t, "tcp", ResumeConfig{Store: store, BufferBytes: perSession, MaxRetainedBytes: budget})
	ctx := context.Background()
	var clients []*Conn
	var tokens [][]byte
	for i := range 4 {
		tok := []byte(fmt.Sprintf("budget-token-%d", i))
		c, err := Dial(ctx, "tcp://"+addr, WithResume(ResumeConfig{Token: tok}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients, tokens = append(clients, c), append(tokens, tok)
	}
	serverSide := func(tok []byte) (limit, retained int) {
		t.Helper()
		sc := store.Lookup(tok)
		if sc == nil {
			t.Fatalf("no server session for %s", tok)
		}
		sc.mu.Lock()
		defer sc.mu.Unlock()
		n, _ := sc.machine.RetainedBytes()
		return sc.resumable.limit, n
	}
	for _, c := range clients {
		s, err := c.RequestStream(ctx, Payload{Data: []byte("50000")}, 1024) // ~500 KB of frames
		if err != nil {
			t.Fatal(err)
		}
		var rerr error
		within(t, "a stream", func() { rerr = readStream(s, 50_000) })
		if rerr != nil {
			t.Fatal(rerr)
		}
	}
	for _, tok := range tokens {
		if limit, n := serverSide(tok); limit != budget/4 || n > budget/4 {
			t.Fatalf("%s: limit %d, retained %d; want limit %d and no more retained", tok, limit, n, budget/4)
		}
	}
	for _, c := range clients[1:] {
		c.Close()
	}
	within(t, "the closed sessions to leave the store", func() {
		for store.Lookup(tokens[1]) != nil || store.Lookup(tokens[2]) != nil || store.Lookup(tokens[3]) != nil {
			time.Sleep(time.Millisecond)
		}
	})
	if _, err := clients[0].RequestResponse(ctx, Payload{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if limit, _ := serverSide(tokens[0]); limit != budget {
		t.Fatalf("alone, the session's limit is %d, want the whole budget %d (below BufferBytes)", limit, budget)
	}
}

// TestNoResumeOnAStoppingServer: a connection that reaches a server
// whose context has ended (it is stopping: SIGTERM drops its sessions'
// transports, and their clients redial before the listener is closed)
// is closed without an answer, so its client resumes on the next server
// instead of on this one, which would drop it again. Before, the dying
// server resumed it (a client counted two resumes for one restart).
// The sessions are in memory here: the server decides before it asks
// its store, so a journal (rsocket/resumejournal) changes nothing.
func TestNoResumeOnAStoppingServer(t *testing.T) {
	store := NewMemoryResumeStore(0)
	var err error
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, first := range []string{"RESUME", "SETUP"} {
		srv, cli := net.Pipe()
		go serveResumableConn(ctx, srv, newEcho(), []Option{WithResume(ResumeConfig{Store: store})})
		var f []byte
		if first == "RESUME" {
			f, err = frame.AppendResume(nil, 1, 0, []byte("token"), 0, 0)
		} else {
			f, err = frame.AppendSetup(nil, frame.Setup{MajorVersion: 1, KeepaliveInterval: 1000, MaxLifetime: 10000,
				MetadataMIME: []byte("a/b"), DataMIME: []byte("a/b"), ResumeToken: []byte("token")})
		}
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b, _ := frame.AppendLengthPrefix(nil, len(f))
			_, _ = cli.Write(append(b, f...))
		}()
		var answer []byte
		within(t, "the stopping server's answer", func() { answer, err = io.ReadAll(cli) })
		if len(answer) != 0 {
			t.Fatalf("%s to a stopping server: answered %d bytes (%x); want the connection closed without an answer", first, len(answer), answer)
		}
		cli.Close()
	}
}
