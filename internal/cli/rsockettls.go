package cli

import (
	"crypto/tls"
	"flag"
	"strings"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/rsocket"
)

// RSocketTLS are an RSocket client command's TLS flags: the server is
// verified against a CA, never skipped.
type RSocketTLS struct{ ca, cert, key, serverName *string }

// AddRSocketTLS registers --tls-ca, --tls-cert, --tls-key and
// --tls-server-name on fs.
func AddRSocketTLS(fs *flag.FlagSet) *RSocketTLS {
	return &RSocketTLS{
		ca:         fs.String("tls-ca", "", "for tls:// and wss://: trust this CA bundle (PEM) instead of the system's roots"),
		cert:       fs.String("tls-cert", "", "client certificate (PEM) for mutual TLS"),
		key:        fs.String("tls-key", "", "client key (PEM) for mutual TLS"),
		serverName: fs.String("tls-server-name", "", "name expected in the server's certificate (default: the URL's host)"),
	}
}

// Option returns the rsocket.WithTLS option for url (none for tcp:// and
// ws:// without TLS flags; with them, Dial refuses the clear-text URL).
func (f *RSocketTLS) Option(url string) ([]rsocket.Option, error) {
	set := *f.ca != "" || *f.cert != "" || *f.key != "" || *f.serverName != ""
	// url may be a comma-separated list (load-balanced): TLS if any is.
	if !set && !strings.Contains(url, "tls://") && !strings.Contains(url, "wss://") {
		return nil, nil
	}
	if set {
		// Every URL of the list must be a TLS one: rsocket.Dial refuses
		// a clear-text URL with TLS options, naming its own option.
		for u := range strings.SplitSeq(url, ",") {
			if !strings.HasPrefix(u, "tls://") && !strings.HasPrefix(u, "wss://") {
				return nil, Usagef("--tls-* given for %q: use a tls:// or wss:// URL (or drop the --tls-* flags)", u)
			}
		}
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	return []rsocket.Option{rsocket.WithTLS(cfg)}, nil
}

// Config is the client TLS configuration the flags describe; a bad file
// is a usage error (exit 2).
func (f *RSocketTLS) Config() (*tls.Config, error) {
	cfg, err := auth.ClientTLS(*f.ca, *f.cert, *f.key, *f.serverName)
	if err != nil {
		return nil, Usagef("--tls-*: %v", err)
	}
	return cfg, nil
}
