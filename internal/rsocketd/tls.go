package rsocketd

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/auth"
)

// ListenerTLS checks the --listen URLs (CheckListen) and returns the
// server TLS of the certificate, key and client CA files (nil: none
// given), refusing a tls:// or wss:// listener without it: a secure
// scheme must not serve in clear text.
func ListenerTLS(listen []string, cert, key, clientCA string) (*tls.Config, error) {
	if err := CheckListen(listen); err != nil {
		return nil, err
	}
	var tlsCfg *tls.Config
	if cert != "" || key != "" || clientCA != "" {
		cfg, err := auth.ServerTLS(cert, key, clientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key/--tls-client-ca: %v", err)
		}
		tlsCfg = cfg
	}
	for _, u := range listen {
		if (strings.HasPrefix(u, "tls://") || strings.HasPrefix(u, "wss://")) && tlsCfg == nil {
			return nil, fmt.Errorf("--listen %s needs --tls-cert and --tls-key", u)
		}
	}
	return tlsCfg, nil
}
