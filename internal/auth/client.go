package auth

import (
	"crypto/tls"
	"errors"
	"fmt"
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
