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
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

// svc is a scripted sink: it answers Hello with Welcome (or a status,
// by agent id), each Message with Credit, Error and Ack, and reports the
// peer it saw; a read gives one Stored and EndOfLog.
type svc struct {
	peers   chan protocol.PeerInfo
	started chan protocol.Conn // each Send session, once welcomed
}

func newSvc() *svc {
	return &svc{peers: make(chan protocol.PeerInfo, 256), started: make(chan protocol.Conn, 256)}
}

func (s *svc) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *protocol.Hello:
			switch f.AgentID {
			case "bad":
				return protocol.Errorf(protocol.StatusPermissionDenied, "agent %q", f.AgentID)
			case "down":
				return protocol.Errorf(protocol.StatusUnavailable, "store down")
			case "replaced":
				return protocol.Errorf(protocol.StatusAborted, "replaced by a newer session of agent %q", f.AgentID)
			case "silent":
				<-c.Context().Done()
				return nil
			}
			s.peers <- c.Peer()
			if err := c.Send(&protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 8, Bytes: 1 << 20}, SessionID: f.AgentID}); err != nil {
				return err
			}
			s.started <- c
		case *protocol.Message:
			c.Send(&protocol.Credit{Credits: &protocol.Credits{Messages: 9}})
			c.Send(&protocol.Error{MessageID: f.ID, Code: protocol.CodeOverCredit, Retryable: true})
			c.Send(&protocol.Ack{Ranges: []protocol.IDRange{{First: f.ID, Last: f.ID}}})
		}
	}
}

func (s *svc) ServeRead(c protocol.Conn) error {
	f, err := c.Recv()
	if err != nil {
		return err
	}
	st, ok := f.(*protocol.ReadStart)
	if !ok {
		return protocol.Errorf(protocol.StatusInvalid, "want ReadStart, got %s", protocol.Name(f))
	}
	if st.From > 10 {
		return protocol.Errorf(protocol.StatusOutOfRange, "offset %d", st.From)
	}
	if err := c.Send(&protocol.Stored{Offset: st.From, AgentID: "a", MessageID: 1, Records: [][]byte{[]byte("r"), []byte("s")}}); err != nil {
		return err
	}
	if f, err := c.Recv(); err != nil || f.(*protocol.Commit).Offset != st.From {
		return protocol.Errorf(protocol.StatusInvalid, "want Commit: %v %v", f, err)
	}
	return c.Send(&protocol.EndOfLog{Next: st.From + 1})
}

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
	svc *svc
}

// serve runs svc over "tcp" or "ws" and returns its URL.
func serve(t *testing.T, transport string, opts ...rsockettransport.Option) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: raw}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{ln: ln, svc: newSvc()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if transport == "ws" {
			rsockettransport.ServeWebSocket(ctx, ln, "/sluice", s.svc, opts...)
		} else {
			rsockettransport.Serve(ctx, ln, s.svc, opts...)
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

func TestSendSession(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr)
		c, err := dialer(t, s.url, rsockettransport.WithToken("tok"), rsockettransport.AllowTokenWithoutTLS()).Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(nil)
		hello(t, c, "a")
		if pi := <-s.svc.peers; pi.Token != "tok" || pi.Addr == "" || pi.TLS != nil {
			t.Fatalf("peer %+v", pi)
		}
		payload := make([]byte, 100_000) // larger than a slab piece and than an RSocket frame's default
		payload[99_999] = 7
		if err := c.Send(&protocol.Message{ID: 7, Records: 1, Codec: protocol.CodecZstd, Payload: payload}); err != nil {
			t.Fatal(err)
		}
		var names []string
		for len(names) < 3 {
			f, err := c.Recv()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, protocol.Name(f))
			if e, ok := f.(*protocol.Error); ok && (e.MessageID != 7 || e.Code != protocol.CodeOverCredit || !e.Retryable) {
				t.Fatalf("%+v", e)
			}
		}
		if fmt.Sprint(names) != "[Credit Error Ack]" {
			t.Fatal(names)
		}
		if err := c.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Recv(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	})
}

func TestStatusCrossesTheWire(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		d := dialer(t, serve(t, tr).url)
		for _, tc := range []struct {
			agent     string
			status    protocol.Status
			retryable bool
		}{{"bad", protocol.StatusPermissionDenied, false}, {"down", protocol.StatusUnavailable, true},
			{"replaced", protocol.StatusAborted, false}} {
			c, err := d.Send(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			err = c.Send(&protocol.Hello{AgentID: tc.agent, Version: protocol.Version})
			if err == nil {
				_, err = c.Recv()
			}
			if protocol.StatusOf(err) != tc.status || protocol.IsRetryable(err) != tc.retryable {
				t.Fatalf("%s: got %v (status %v)", tc.agent, err, protocol.StatusOf(err))
			}
			// Sending after the status gives the same status.
			if err := c.Send(&protocol.Message{ID: 1}); protocol.StatusOf(err) != tc.status {
				t.Fatalf("%s: send after end: %v", tc.agent, err)
			}
			c.Close(nil)
		}
		r, _ := d.Read(context.Background())
		r.Send(&protocol.ReadStart{From: 11})
		if _, err := r.Recv(); protocol.StatusOf(err) != protocol.StatusOutOfRange {
			t.Fatalf("read: %v", err)
		}
	})
}

func TestReadSession(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		r, err := dialer(t, serve(t, tr).url).Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r.Send(&protocol.ReadStart{From: 3, Group: "g"})
		f, err := r.Recv()
		if s, ok := f.(*protocol.Stored); err != nil || !ok || s.Offset != 3 || len(s.Records) != 2 || string(s.Records[1]) != "s" {
			t.Fatalf("%#v %v", f, err)
		}
		r.Send(&protocol.Commit{Offset: 3})
		f, err = r.Recv()
		if e, ok := f.(*protocol.EndOfLog); err != nil || !ok || e.Next != 4 {
			t.Fatalf("%#v %v", f, err)
		}
		if _, err := r.Recv(); err != io.EOF {
			t.Fatal(err)
		}
	})
}

// A connection that dies mid-session fails the session's Recv with a
// retryable error and ends its context; the next session dials again.
func TestConnectionKilled(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr)
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

// Many concurrent sessions share one connection.
func TestManySessions(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr)
		d := dialer(t, s.url)
		const n = 50
		var wg sync.WaitGroup
		var failed atomic.Int32
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := d.Send(context.Background())
				if err != nil {
					t.Error(err)
					failed.Add(1)
					return
				}
				defer c.Close(nil)
				agent := fmt.Sprint("a", i)
				if err := c.Send(&protocol.Hello{AgentID: agent, Version: protocol.Version}); err != nil {
					t.Error(err)
					return
				}
				if f, err := c.Recv(); err != nil || f.(*protocol.Welcome).SessionID != agent {
					t.Errorf("%s: %v %v", agent, f, err)
					return
				}
				for id := uint64(1); id <= 20; id++ {
					if err := c.Send(&protocol.Message{ID: id, Payload: []byte(agent)}); err != nil {
						t.Error(err)
						return
					}
					for range 3 {
						f, err := c.Recv()
						if err != nil {
							t.Error(err)
							return
						}
						if a, ok := f.(*protocol.Ack); ok && a.Ranges[0].First != id {
							t.Errorf("%s: ack %v for %d", agent, a.Ranges, id)
						}
					}
				}
			}()
		}
		wg.Wait()
		if n := s.ln.accepted(); n != 1 {
			t.Fatalf("%d connections, want 1", n)
		}
	})
}

// With TLS the sink sees the agent's client certificate.
func TestTLSPeer(t *testing.T) {
	ca := testpki.NewCA(t)
	srvCert := ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	cliCert := ca.Issue(t, "agent-1", x509.ExtKeyUsageClientAuth)
	s := serve(t, "tcp", rsockettransport.WithTLS(&tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}))
	d := dialer(t, s.url, rsockettransport.WithTLS(&tls.Config{Certificates: []tls.Certificate{cliCert}, RootCAs: ca.Pool()}), rsockettransport.WithToken("tok"))
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	hello(t, c, "a")
	pi := <-s.svc.peers
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

// The agent's Close (CANCEL) reaches the sink's handler as Canceled.
func TestClientCloseCancelsHandler(t *testing.T) {
	each(t, func(t *testing.T, tr string) {
		s := serve(t, tr)
		c, err := dialer(t, s.url).Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		hello(t, c, "a")
		sc := <-s.svc.started
		c.Close(nil)
		select {
		case <-sc.Context().Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the sink's session did not end")
		}
	})
}

// A session given up before the sink answered (a handshake timeout)
// condemns its connection: the next session dials a new one instead of
// trusting a connection that may be half-open.
func TestSilentSessionRedials(t *testing.T) {
	s := serve(t, "tcp")
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
