package resumetest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

// Issuer is a throwaway certificate authority: internal/testkit/testpki's
// CA. An interface, so that this package, under the public rsocket,
// imports nothing under internal/.
type Issuer interface {
	Pool() *x509.CertPool
	Issue(t testing.TB, cn string, usage x509.ExtKeyUsage, uris ...string) tls.Certificate
}

// MTLS is the PKI of the TLS resume tests: a server ("localhost") that
// requires client certificates of ca, the session's owner and a thief
// with a certificate of its own from the same CA, and the session's
// token.
type MTLS struct {
	Server, Owner, Thief *tls.Config
	Token                []byte
}

// NewMTLS issues the server's and both clients' certificates from ca.
func NewMTLS(t testing.TB, ca Issuer) MTLS {
	t.Helper()
	client := func(name string) *tls.Config {
		cert := ca.Issue(t, name, x509.ExtKeyUsageClientAuth)
		return &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{cert}}
	}
	srvCert := ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	return MTLS{
		Server: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert},
		Owner:  client("owner"),
		Thief:  client("thief"),
		Token:  []byte("0123456789abcdef"),
	}
}
