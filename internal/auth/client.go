package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"google.golang.org/grpc/credentials"
)

// ClientTLS returns the TLS configuration of a client. caFile is the CA
// bundle (PEM) that signed the server's certificate; empty means the
// system's roots. certFile and keyFile, both or neither, are the client's
// certificate for mutual TLS. serverName overrides the name checked in the
// server's certificate (default: the host of the dialled address).
func ClientTLS(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("auth: a client certificate needs both its certificate and key files")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("auth: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Bearer is a credentials.PerRPCCredentials sending "authorization: Bearer
// TOKEN" with every call.
type Bearer struct {
	token         string
	allowInsecure bool
}

// NewBearer returns credentials sending token. Unless allowInsecure is set,
// gRPC refuses to send them over a connection without TLS (see the package
// documentation: allowInsecure is for loopback tests only).
func NewBearer(token string, allowInsecure bool) Bearer {
	return Bearer{token: token, allowInsecure: allowInsecure}
}

var _ credentials.PerRPCCredentials = Bearer{}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: true
// unless the Bearer was made with allowInsecure.
func (b Bearer) RequireTransportSecurity() bool { return !b.allowInsecure }
