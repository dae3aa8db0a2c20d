// Package testpki makes throwaway certificate authorities and certificates
// for tests. It is for tests only: keys are fresh P-256 keys made per call,
// nothing is kept secret, certificates are valid from an hour ago to an
// hour from now, and every failure ends the calling test with t.Fatal.
//
// It exists so that the packages testing TLS (auth, sink, agent and the
// CLI's end-to-end tests) share one way of making certificates instead of
// each writing its own.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CA is a throwaway certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA returns a new certificate authority.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der := create(t, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key}
}

// Pool returns a new pool trusting only the CA.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Issue returns a certificate signed by the CA with Common Name cn, the
// extended key usage usage and URI SANs uris (such as spiffe:// ids). It is
// valid for 127.0.0.1, ::1, localhost and cn (as a host name or IP).
func (ca *CA) Issue(t testing.TB, cn string, usage x509.ExtKeyUsage, uris ...string) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := leafTemplate(t, cn, usage, uris)
	der := create(t, tmpl, ca.Cert, key, ca.Key)
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// WriteCA writes the CA's certificate to dir/ca.pem and returns its path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.pem")
	writeFile(t, path, "CERTIFICATE", ca.Cert.Raw)
	return path
}

// WritePEM writes cert to dir/NAME.pem and its key to dir/NAME-key.pem (as
// PKCS #8), the files tls.LoadX509KeyPair and the --*-tls-cert/-key flags
// read.
func WritePEM(t testing.TB, dir, name string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	var certPEM []byte
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// SelfSigned writes a self-signed server certificate for 127.0.0.1, ::1
// and localhost to dir/cert.pem and dir/cert-key.pem and returns the files
// and a pool trusting the certificate.
func SelfSigned(t testing.TB, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key := newKey(t)
	tmpl := leafTemplate(t, "localhost", x509.ExtKeyUsageServerAuth, nil)
	der := create(t, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = WritePEM(t, dir, "cert", tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func leafTemplate(t testing.TB, cn string, usage x509.ExtKeyUsage, uris []string) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}
	// The CN as a SAN too, so a test may dial by it (clients ignore the CN
	// itself); names with spaces are not host names.
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if cn != "" && cn != "localhost" && !strings.ContainsAny(cn, " \t") {
		tmpl.DNSNames = append(tmpl.DNSNames, cn)
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	return tmpl
}

func create(t testing.TB, tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// serial is random so certificates from different CAs in one test never
// share an issuer and serial.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}

func writeFile(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Files is a throwaway CA with a server and a client certificate, written
// as PEM files in a temporary directory: what the tests of TLS configured
// from files (internal/auth, the gRPC transport) start from.
type Files struct {
	Dir                                              string
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// WriteFiles makes a CA, a server certificate for "sink.test" (the
// ServerName clients dial) and a client certificate "client", and writes
// them to a fresh temporary directory.
func WriteFiles(t testing.TB) *Files {
	t.Helper()
	p := &Files{Dir: t.TempDir()}
	ca := NewCA(t)
	p.CA = ca.WriteCA(t, p.Dir)
	p.ServerCert, p.ServerKey = WritePEM(t, p.Dir, "server", ca.Issue(t, "sink.test", x509.ExtKeyUsageServerAuth))
	p.ClientCert, p.ClientKey = WritePEM(t, p.Dir, "client", ca.Issue(t, "client", x509.ExtKeyUsageClientAuth))
	return p
}
