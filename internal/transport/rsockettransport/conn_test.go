package rsockettransport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/conntest"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// svc is a scripted sink for this transport's own tests: it answers
// Hello with Welcome (8 messages of credit, the agent id as session id)
// and reports the peer it saw, or, for agent "silent", never answers.
// The behaviour all transports share is conntest's (TestConformance).
type svc struct {
	peers chan protocol.PeerInfo
}

func newSvc() *svc { return &svc{peers: make(chan protocol.PeerInfo, 256)} }

func (s *svc) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h, ok := f.(*protocol.Hello); ok {
			if h.AgentID == "silent" {
				<-c.Context().Done()
				return nil
			}
			s.peers <- c.Peer()
			if err := c.Send(&protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 8, Bytes: 1 << 20}, SessionID: h.AgentID}); err != nil {
				return err
			}
		}
	}
}

func (s *svc) ServeRead(c protocol.Conn) error { return nil }

// countingListener counts accepted connections and can kill them all.
type countingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *countingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *countingListener) killAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}

type server struct {
	url string
	ln  *countingListener
}

// serve runs svc over "tcp" or "ws" and returns its URL.
func serve(t *testing.T, transport string, svc protocol.Service, opts ...rsockettransport.Option) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: raw}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if transport == "ws" {
			rsockettransport.ServeWebSocket(ctx, ln, "/sluice", svc, opts...)
		} else {
			rsockettransport.Serve(ctx, ln, svc, opts...)
		}
	}()
	t.Cleanup(func() { cancel(); ln.killAll(); <-done })
	s.url = "tcp://" + raw.Addr().String()
	if transport == "ws" {
		s.url = "ws://" + raw.Addr().String() + "/sluice"
	}
	return s
}

func dialer(t *testing.T, url string, opts ...rsockettransport.Option) *rsockettransport.Dialer {
	t.Helper()
	d, err := rsockettransport.NewDialer(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var transports = []string{"tcp", "ws"}

func each(t *testing.T, f func(t *testing.T, transport string)) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) { f(t, tr) })
	}
}

func hello(t *testing.T, c protocol.Conn, agent string) *protocol.Welcome {
	t.Helper()
	if err := c.Send(&protocol.Hello{AgentID: agent, Version: protocol.Version, Codecs: []protocol.Codec{protocol.CodecZstd}}); err != nil {
		t.Fatal(err)
	}
	f, err := c.Recv()
	w, ok := f.(*protocol.Welcome)
	if err != nil || !ok || w.Credits.Messages != 8 || w.SessionID != agent {
		t.Fatalf("welcome: %#v %v", f, err)
	}
	return w
}

// TestConformance runs the protocol.Conn suite over RSocket, on TCP and
// on WebSocket.
func TestConformance(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		conntest.Run(t, func(t *testing.T, svc protocol.Service) protocol.Dialer { return dialer(t, serve(t, tr, svc).url) })
	})
}

// A token reaches the sink's end as the peer's, with its address, and no
// TLS state without TLS.
func TestTokenReachesPeer(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		sv := newSvc()
		c, err := dialer(t, serve(t, tr, sv).url, rsockettransport.WithToken("tok"), rsockettransport.AllowTokenWithoutTLS()).Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(nil)
		hello(t, c, "a")
		if pi := <-sv.peers; pi.Token != "tok" || pi.Addr == "" || pi.TLS != nil {
			t.Fatalf("peer %+v", pi)
		}
	})
}

// Many concurrent sessions share one connection.
func TestSessionsShareOneConnection(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr, conntest.NewSvc())
		d := dialer(t, s.url)
		const n = 50
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := conntest.Session(d, fmt.Sprint("a", i), 20); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := s.ln.accepted(); n != 1 {
			t.Fatalf("%d connections, want 1", n)
		}
	})
}

// A connection that dies mid-session fails the session's Recv with a
// retryable error and ends its context; the next session dials again.
func TestConnectionKilled(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr, newSvc())
		d := dialer(t, s.url)
		c, err := d.Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		hello(t, c, "a")
		s.ln.killAll()
		_, err = c.Recv()
		if err == nil || !protocol.IsRetryable(err) {
			t.Fatalf("recv after kill: %v (status %v)", err, protocol.StatusOf(err))
		}
		select {
		case <-c.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the session's context did not end")
		}
		c2, err := d.Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close(nil)
		hello(t, c2, "b")
		if n := s.ln.accepted(); n != 2 {
			t.Fatalf("%d connections, want 2 (one redial)", n)
		}
	})
}

// With TLS the sink sees the agent's client certificate.
func TestTLSPeer(t *testing.T) {
	ca := testpki.NewCA(t)
	srvCert := ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	cliCert := ca.Issue(t, "agent-1", x509.ExtKeyUsageClientAuth)
	sv := newSvc()
	s := serve(t, "tcp", sv, rsockettransport.WithTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}))
	d := dialer(t, s.url, rsockettransport.WithTLS(&tls.Config{Certificates: []tls.Certificate{cliCert}, RootCAs: ca.Pool()}), rsockettransport.WithToken("tok"))
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	hello(t, c, "a")
	pi := <-sv.peers
	if pi.TLS == nil || len(pi.TLS.PeerCertificates) == 0 || pi.TLS.PeerCertificates[0].Subject.CommonName != "agent-1" || pi.Token != "tok" {
		t.Fatalf("peer %+v", pi)
	}
	if c.Peer().TLS == nil {
		t.Fatal("the client end has no TLS state")
	}
}

func TestTokenWithoutTLSRefused(t *testing.T) {
	if _, err := rsockettransport.NewDialer("tcp://127.0.0.1:1", rsockettransport.WithToken("t")); !errors.Is(err, rsockettransport.ErrTokenWithoutTLS) {
		t.Fatal(err)
	}
	for _, bad := range []string{"http://x:1", "tcp://", "::"} {
		if _, err := rsockettransport.NewDialer(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// A session given up before the sink answered (a handshake timeout)
// condemns its connection: the next session dials a new one instead of
// trusting a connection that may be half-open.
func TestSilentSessionRedials(t *testing.T) {
	s := serve(t, "tcp", newSvc())
	d := dialer(t, s.url)
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&protocol.Hello{AgentID: "silent", Version: protocol.Version}); err != nil {
		t.Fatal(err)
	}
	c.Close(nil) // the agent's handshake timeout
	c2, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(nil)
	hello(t, c2, "a")
	if n := s.ln.accepted(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	// A session that heard from the sink leaves the connection alone.
	c2.Close(nil)
	c3, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close(nil)
	hello(t, c3, "b")
	if n := s.ln.accepted(); n != 2 {
		t.Fatalf("%d connections, want still 2", n)
	}
}
