package rsockettransport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/conntest"
	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// server is a transport server for svc, reached through a fault proxy
// that counts the connections made to it and can cut them.
type server struct {
	url   string
	proxy *faultproxy.Proxy
}

// serve runs svc over "tcp" or "ws" and returns its URL.
func serve(t *testing.T, transport string, svc protocol.Service, opts ...rsockettransport.Option) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := faultproxy.New(t, ln.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if transport == "ws" {
			rsockettransport.ServeWebSocket(ctx, ln, "/sluice", svc, opts...)
		} else {
			rsockettransport.Serve(ctx, ln, svc, opts...)
		}
	}()
	t.Cleanup(func() { cancel(); p.CloseAll(); <-done })
	s := &server{url: "tcp://" + p.Addr(), proxy: p}
	if transport == "ws" {
		s.url = "ws://" + p.Addr() + "/sluice"
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
		sv := conntest.NewSvc()
		c, err := dialer(t, serve(t, tr, sv).url, rsockettransport.WithToken("tok"), rsockettransport.AllowTokenWithoutTLS()).Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(nil)
		conntest.Hello(t, c, "a")
		if pi := (<-sv.Started).Peer(); pi.Token != "tok" || pi.Addr == "" || pi.TLS != nil {
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
		if n := s.proxy.Accepted(); n != 1 {
			t.Fatalf("%d connections, want 1", n)
		}
	})
}

// A connection that dies mid-session fails the session's Recv with a
// retryable error and ends its context; the next session dials again.
func TestConnectionKilled(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr, conntest.NewSvc())
		d := dialer(t, s.url)
		c, err := d.Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conntest.Hello(t, c, "a")
		s.proxy.CutAll()
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
		conntest.Hello(t, c2, "b")
		if n := s.proxy.Accepted(); n != 2 {
			t.Fatalf("%d connections, want 2 (one redial)", n)
		}
	})
}

// With TLS the sink sees the agent's client certificate.
func TestTLSPeer(t *testing.T) {
	ca := testpki.NewCA(t)
	srvCert := ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	cliCert := ca.Issue(t, "agent-1", x509.ExtKeyUsageClientAuth)
	sv := conntest.NewSvc()
	s := serve(t, "tcp", sv, rsockettransport.WithTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}))
	d := dialer(t, s.url, rsockettransport.WithTLS(&tls.Config{Certificates: []tls.Certificate{cliCert}, RootCAs: ca.Pool()}), rsockettransport.WithToken("tok"))
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	conntest.Hello(t, c, "a")
	pi := (<-sv.Started).Peer()
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
	s := serve(t, "tcp", conntest.NewSvc())
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
	conntest.Hello(t, c2, "a")
	if n := s.proxy.Accepted(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	// A session that heard from the sink leaves the connection alone.
	c2.Close(nil)
	c3, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close(nil)
	conntest.Hello(t, c3, "b")
	if n := s.proxy.Accepted(); n != 2 {
		t.Fatalf("%d connections, want still 2", n)
	}
}
