package auth

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/defaults"
)

// ReaderID is the agent id field of a consumer token in the tokens file.
const ReaderID = "*"

// MinTokenLen is the shortest token the tokens file accepts: 16 bytes is
// the least that resists guessing when tokens are random.
const MinTokenLen = 16

// maxAgentID is the longest agent id (Hello.agent_id's limit).
const maxAgentID = defaults.MaxAgentIDLen

// ServerTLS returns the TLS configuration of a server presenting the
// certificate in certFile with the key in keyFile (PEM). If clientCAFile is
// not empty, clients must present a certificate signed by one of the CAs in
// it (mutual TLS); otherwise no client certificate is asked for.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("auth: TLS needs both a certificate and a key file")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("auth: load server certificate: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("auth: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// Identity is who a token says the caller is.
type Identity struct {
	// AgentID is the agent the token belongs to, or ReaderID for a
	// consumer token.
	AgentID string
}

// CanSend reports whether the identity may open a Send stream as agentID.
func (id Identity) CanSend(agentID string) bool {
	return id.AgentID != ReaderID && id.AgentID == agentID
}

// CanRead reports whether the identity may read the store.
func (id Identity) CanRead() bool { return id.AgentID == ReaderID }

type ctxKey struct{}

// NewContext returns ctx carrying id; the interceptors use it, and tests
// may too.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity the interceptor authenticated, if any.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(Identity)
	return id, ok
}

// Tokens is a parsed tokens file. It is immutable and safe for concurrent
// use.
type Tokens struct {
	// byDigest maps the SHA-256 of each token to its identity.
	byDigest map[[sha256.Size]byte]Identity
}

// LoadTokens reads a tokens file (see the package documentation).
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokens parses the contents of a tokens file. It fails on a line
// that is not "TOKEN AGENT_ID", a token shorter than MinTokenLen, an agent
// id over 255 bytes, a token listed twice, or a file with no token.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{byDigest: make(map[[sha256.Size]byte]Identity)}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch {
		case len(f) != 2:
			return nil, fmt.Errorf("auth: tokens line %d: want \"TOKEN AGENT_ID\", found %d fields", n, len(f))
		case len(f[0]) < MinTokenLen:
			return nil, fmt.Errorf("auth: tokens line %d: token shorter than %d bytes", n, MinTokenLen)
		case len(f[1]) > maxAgentID:
			return nil, fmt.Errorf("auth: tokens line %d: agent id longer than %d bytes", n, maxAgentID)
		}
		d := sha256.Sum256([]byte(f[0]))
		if _, dup := t.byDigest[d]; dup {
			return nil, fmt.Errorf("auth: tokens line %d: token listed twice", n)
		}
		t.byDigest[d] = Identity{AgentID: f[1]}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: read tokens: %w", err)
	}
	if len(t.byDigest) == 0 {
		return nil, errors.New("auth: no token in the tokens file")
	}
	return t, nil
}

// Len returns the number of tokens.
func (t *Tokens) Len() int { return len(t.byDigest) }

// Lookup returns the identity of token.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	id, ok := t.byDigest[sha256.Sum256([]byte(token))]
	return id, ok
}
