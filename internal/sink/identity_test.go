package sink

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"net"
	"net/url"
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
)

// testCA issues certificates in memory.
type testCA struct {
	t    *testing.T
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pool *x509.CertPool
	n    int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca := &testCA{t: t, key: genKey(t), n: 1}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.pool = x509.NewCertPool()
	ca.pool.AddCert(ca.cert)
	return ca
}

func genKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// issue returns a certificate with Common Name cn and the given URI SANs.
func (ca *testCA) issue(cn string, usage x509.ExtKeyUsage, uris ...string) tls.Certificate {
	ca.t.Helper()
	key := genKey(ca.t)
	ca.n++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.n), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			ca.t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mtlsHarness runs a sink requiring client certificates from ca, with a
// client presenting client.
func mtlsHarness(t *testing.T, ca *testCA, client tls.Certificate) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncBuffer{}}
	h.cfg = Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(h.logs, nil)),
		TLS: &tls.Config{
			Certificates: []tls.Certificate{ca.issue("sink", x509.ExtKeyUsageServerAuth)},
			ClientCAs:    ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}}
	h.dial = []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.pool, Certificates: []tls.Certificate{client}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12,
	}))}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// TestCertificateIdentity: with mutual TLS (and no tokens) the client
// certificate decides which agent id a stream may use and whether it may
// read; a Hello naming another agent is refused and logged.
func TestCertificateIdentity(t *testing.T) {
	ca := newTestCA(t)
	client := x509.ExtKeyUsageClientAuth

	// A SPIFFE agent certificate: its own id only, no reading.
	h := mtlsHarness(t, ca, ca.issue("ignored-cn", client, "spiffe://example.org/agent/edge-1"))
	a := h.connect("edge-1")
	a.send(plainReq(1, "from edge-1"))
	a.collect(1)
	b := h.open()
	b.send(helloReq("edge-2"))
	if err := b.status(); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"edge-2"`) {
		t.Errorf("edge-1's certificate sending as edge-2: %v, want PermissionDenied", err)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "client certificate not valid for agent") || !strings.Contains(logs, "agent_id=edge-2") {
		t.Errorf("refusal not logged:\n%s", logs)
	}
	if err := h.read(&sluicev1.ReadStart{}).status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("agent certificate reading: %v, want PermissionDenied", err)
	}

	// A certificate without a SPIFFE URI: the Common Name is the agent id.
	h = mtlsHarness(t, ca, ca.issue("edge-3", client))
	h.connect("edge-3")
	c := h.open()
	c.send(helloReq("edge-1"))
	if err := c.status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("CN edge-3 sending as edge-1: %v, want PermissionDenied", err)
	}

	// Reader certificates read and may not send.
	for _, cert := range []tls.Certificate{
		ca.issue("anything", client, "spiffe://example.org/reader"),
		ca.issue(auth.ReaderCN, client),
	} {
		h = mtlsHarness(t, ca, cert)
		if e := h.read(&sluicev1.ReadStart{}).next().GetEnd(); e == nil {
			t.Error("reader certificate: no EndOfLog")
		}
		d := h.open()
		d.send(helloReq("*"))
		if err := d.status(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("reader certificate sending: %v, want PermissionDenied", err)
		}
	}

	// A certificate naming two identities names none.
	h = mtlsHarness(t, ca, ca.issue("x", client, "spiffe://example.org/agent/x", "spiffe://example.org/reader"))
	e := h.open()
	e.send(helloReq("x"))
	if err := e.status(); status.Code(err) != codes.PermissionDenied {
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
		logs := &syncBuffer{}
		s, err := New(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		lis := &addrListener{addr: &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 7000},
			closed: make(chan struct{}), accepting: make(chan struct{})}
		served := make(chan error, 1)
		go func() { served <- s.Serve(lis) }()
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
