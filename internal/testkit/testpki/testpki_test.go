package testpki_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
)

// TestIssueAndWrite: issued leaves verify against the CA for the loopback
// names and their CN, and the written files load as a key pair.
func TestIssueAndWrite(t *testing.T) {
	ca := testpki.NewCA(t)
	cert := ca.Issue(t, "sink.test", x509.ExtKeyUsageServerAuth, "spiffe://example.org/agent/a")
	for _, name := range []string{"127.0.0.1", "::1", "localhost", "sink.test"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.Pool()}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if len(cert.Leaf.URIs) != 1 || cert.Leaf.URIs[0].String() != "spiffe://example.org/agent/a" {
		t.Errorf("URIs %v", cert.Leaf.URIs)
	}
	dir := t.TempDir()
	certFile, keyFile := testpki.WritePEM(t, dir, "server", cert)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if ca.WriteCA(t, dir) == "" {
		t.Fatal("no CA file")
	}
	certFile, keyFile, pool := testpki.SelfSigned(t, dir)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: pool}); err != nil {
		t.Fatal(err)
	}
}
