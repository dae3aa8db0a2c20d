package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// ReaderCN is the Common Name of a reader certificate that carries no
// SPIFFE URI (see CertIdentity). An agent whose certificate names it by CN
// alone therefore cannot be called "reader"; give it a SPIFFE URI instead.
const ReaderCN = "reader"

// MutualTLS reports whether cfg requires and verifies client certificates,
// that is whether a connection's certificate says who the client is.
func MutualTLS(cfg *tls.Config) bool {
	return cfg != nil && cfg.ClientAuth == tls.RequireAndVerifyClientCert
}

// CertIdentity returns the identity a verified client certificate binds:
//
//   - a URI SAN spiffe://TRUST-DOMAIN/agent/ID makes it agent ID;
//   - a URI SAN spiffe://TRUST-DOMAIN/reader makes it a reader (ReaderID);
//   - without a spiffe:// URI SAN, the subject Common Name is the agent id,
//     except ReaderCN, which makes it a reader.
//
// A certificate with more than one spiffe:// URI SAN, or one of another
// shape, or with neither such a URI nor a Common Name, is refused: a
// certificate must name exactly one identity.
func CertIdentity(cert *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" {
			continue
		}
		path := strings.TrimPrefix(u.Path, "/")
		switch {
		case path == "reader":
			found = append(found, Identity{AgentID: ReaderID})
		case strings.HasPrefix(path, "agent/") && len(path) > len("agent/"):
			id := strings.TrimPrefix(path, "agent/")
			if len(id) > maxAgentID || id == ReaderID {
				return Identity{}, fmt.Errorf("certificate URI %s: agent id must be 1 to %d bytes and not %q", u, maxAgentID, ReaderID)
			}
			found = append(found, Identity{AgentID: id})
		default:
			return Identity{}, fmt.Errorf("certificate URI %s: want spiffe://TRUST-DOMAIN/agent/ID or spiffe://TRUST-DOMAIN/reader", u)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return Identity{}, errors.New("certificate has more than one spiffe:// URI: it must name one identity")
	}
	cn := cert.Subject.CommonName
	switch {
	case cn == ReaderCN:
		return Identity{AgentID: ReaderID}, nil
	case cn == "" || cn == ReaderID || len(cn) > maxAgentID:
		return Identity{}, fmt.Errorf("certificate names no identity: no spiffe:// URI and Common Name %q is not an agent id", cn)
	}
	return Identity{AgentID: cn}, nil
}
