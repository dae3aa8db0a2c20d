package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"

	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
)

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sink"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTLSAndTokens: a Producer and a Consumer reach a sink that requires
// TLS and bearer tokens; the producer's token names its agent id, the
// consumer's is a reader's; a wrong token is refused and not retried.
func TestTLSAndTokens(t *testing.T) {
	cert, pool := selfSigned(t)
	toks, err := auth.ParseTokens(strings.NewReader("producer-token-0123456789 edge-1\nreader-token-0123456789ab *\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sink.New(sink.Config{DataDir: t.TempDir(), Logger: quiet, Tokens: toks,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- grpcserve.Serve(s.Serving(), lis) }()
	defer func() { s.Close(); <-served }()
	addr := lis.Addr().String()
	clientTLS := client.TLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	if _, err := client.NewProducer(client.SinkAddrs(addr), client.SpoolDir(t.TempDir()), client.Token("x")); err == nil {
		t.Fatal("a token without TLS was accepted")
	}
	p := newProducer(t, client.SinkAddrs(addr), client.SpoolDir(t.TempDir()), clientTLS,
		client.Token("producer-token-0123456789"), client.AgentID("edge-1"))
	recs, want := records("tls", 100)
	if err := p.Produce(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, client.SinkAddrs(addr), clientTLS, client.Token("reader-token-0123456789ab"))
	sameMultiset(t, "store over TLS", readAll(t, c), want)

	// The producer's token cannot read; a following consumer does not
	// retry what needs a person.
	bad := newConsumer(t, client.SinkAddrs(addr), clientTLS, client.Token("producer-token-0123456789"), client.Follow(true))
	_, err = bad.Next(ctx)
	if st := client.StatusOf(err); st != client.StatusPermissionDenied && st != client.StatusUnauthenticated {
		t.Fatalf("reading with an agent's token: %v", err)
	}
	if client.IsRetryable(err) {
		t.Fatalf("a refused token is called retryable: %v", err)
	}
}
