package auth

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
)

// CertFileIdentity is CertIdentity of the first certificate in a PEM
// file: the identity an agent presenting it will have at the sink. A file
// that cannot be read is its *fs.PathError.
func CertFileIdentity(path string) (Identity, error) {
	certPEM, err := os.ReadFile(path)
	if err != nil {
		return Identity{}, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return Identity{}, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return Identity{}, err
	}
	return CertIdentity(cert)
}
