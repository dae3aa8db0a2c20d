package sink

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// mtlsHarness runs a sink requiring client certificates from ca, with a
// client presenting client.
func mtlsHarness(t *testing.T, ca *testpki.CA, client tls.Certificate) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncbuf.Buffer{}}
	h.cfg = Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
		TLS: &tls.Config{
			Certificates: []tls.Certificate{ca.Issue(t, "sink", x509.ExtKeyUsageServerAuth)},
			ClientCAs:    ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}}
	h.dial = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{client}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12,
	}))}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// TestCertificateIdentity: with mutual TLS (and no tokens) the client
// certificate decides which agent id a stream may use and whether it may
// read; a Hello naming another agent is refused and logged.
func TestCertificateIdentity(t *testing.T) {
	ca := testpki.NewCA(t)
	client := x509.ExtKeyUsageClientAuth

	// A SPIFFE agent certificate: its own id only, no reading.
	h := mtlsHarness(t, ca, ca.Issue(t, "ignored-cn", client, "spiffe://example.org/agent/edge-1"))
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(1, "from edge-1"))
	a.Collect(1)
	b := h.open()
	b.Send(sinkclient.Hello("edge-2"))
	if err := b.Status(); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"edge-2"`) {
		t.Errorf("edge-1's certificate sending as edge-2: %v, want PermissionDenied", err)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "client certificate not valid for agent") || !strings.Contains(logs, "agent_id=edge-2") {
		t.Errorf("refusal not logged:\n%s", logs)
	}
	if err := h.read(&sluicev1.ReadStart{}).Status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("agent certificate reading: %v, want PermissionDenied", err)
	}

	// A certificate without a SPIFFE URI: the Common Name is the agent id.
	h = mtlsHarness(t, ca, ca.Issue(t, "edge-3", client))
	h.connect("edge-3")
	c := h.open()
	c.Send(sinkclient.Hello("edge-1"))
	if err := c.Status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("CN edge-3 sending as edge-1: %v, want PermissionDenied", err)
	}

	// Reader certificates read and may not send.
	for _, cert := range []tls.Certificate{
		ca.Issue(t, "anything", client, "spiffe://example.org/reader"),
		ca.Issue(t, auth.ReaderCN, client),
	} {
		h = mtlsHarness(t, ca, cert)
		if e := h.read(&sluicev1.ReadStart{}).Next().GetEnd(); e == nil {
			t.Error("reader certificate: no EndOfLog")
		}
		d := h.open()
		d.Send(sinkclient.Hello("*"))
		if err := d.Status(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("reader certificate sending: %v, want PermissionDenied", err)
		}
	}

	// A certificate naming two identities names none.
	h = mtlsHarness(t, ca, ca.Issue(t, "x", client, "spiffe://example.org/agent/x", "spiffe://example.org/reader"))
	e := h.open()
	e.Send(sinkclient.Hello("x"))
	if err := e.Status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("certificate with two identities: %v, want PermissionDenied", err)
	}
}

// addrListener is a listener that accepts nothing and reports addr.
type addrListener struct {
	addr      net.Addr
	closed    chan struct{}
	accepting chan struct{} // closed at the first Accept
	once, acc sync.Once
}

func (l *addrListener) Accept() (net.Conn, error) {
	l.acc.Do(func() { close(l.accepting) })
	<-l.closed
	return nil, net.ErrClosed
}
func (l *addrListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *addrListener) Addr() net.Addr { return l.addr }

// TestNoAuthWarning: without tokens or mutual TLS the sink warns when it
// serves a non-loopback address, and only then.
func TestNoAuthWarning(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		warn bool
	}{{"127.0.0.1", false}, {"::1", false}, {"0.0.0.0", true}, {"192.0.2.7", true}} {
		logs := &syncbuf.Buffer{}
		s, err := New(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		lis := &addrListener{addr: &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 7000},
			closed: make(chan struct{}), accepting: make(chan struct{})}
		served := make(chan error, 1)
		go func() { served <- grpcserve.Serve(s.Serving(), lis) }()
		// Serve logs before it accepts.
		select {
		case <-lis.accepting:
		case <-time.After(wait):
			t.Fatal("Serve did not accept")
		}
		s.Close()
		<-served
		if got := strings.Contains(logs.String(), "level=WARN msg=\"sink: NO AUTHENTICATION"); got != tc.warn {
			t.Errorf("listening on %s without auth: warned %v, want %v\n%s", tc.ip, got, tc.warn, logs)
		}
	}
}
