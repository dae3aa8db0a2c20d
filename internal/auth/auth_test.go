package auth_test

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
)

const (
	agentToken  = "agent-token-0123456789"
	readerToken = "reader-token-0123456789"
)

func TestParseTokens(t *testing.T) {
	tests := []struct {
		name, in string
		errHas   string // "" for success
	}{
		{"ok", "# sinks\n\n" + agentToken + " edge-1\n  " + readerToken + "\t*  \n", ""},
		{"one field", agentToken + "\n", "line 1: want \"TOKEN AGENT_ID\", found 1 fields"},
		{"three fields", "# c\n" + agentToken + " a b\n", "line 2: want"},
		{"short token", "short a\n", "line 1: token shorter than 16 bytes"},
		{"long agent", agentToken + " " + strings.Repeat("a", 256) + "\n", "agent id longer than 255"},
		{"duplicate", agentToken + " a\n" + agentToken + " b\n", "line 2: token listed twice"},
		{"empty", "# nothing\n", "no token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := auth.ParseTokens(strings.NewReader(tt.in))
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("ParseTokens error = %v, want one containing %q", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id, ok := tok.Lookup(agentToken); !ok || !id.CanSend("edge-1") || id.CanSend("edge-2") || id.CanRead() {
				t.Errorf("agent token: %+v %v", id, ok)
			}
			if id, ok := tok.Lookup(readerToken); !ok || !id.CanRead() || id.CanSend("*") {
				t.Errorf("reader token: %+v %v", id, ok)
			}
			if _, ok := tok.Lookup("nope-nope-nope-nope"); ok {
				t.Error("unknown token found")
			}
		})
	}
}

// pki is a throwaway CA with a server and a client certificate, written as
// PEM files in a temporary directory.
type pki struct {
	dir                                      string
	caFile, srvCert, srvKey, cliCert, cliKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	ca := testpki.NewCA(t)
	p.caFile = ca.WriteCA(t, p.dir)
	// The server's CN is the name clients dial (ServerName "sink.test").
	p.srvCert, p.srvKey = testpki.WritePEM(t, p.dir, "server", ca.Issue(t, "sink.test", x509.ExtKeyUsageServerAuth))
	p.cliCert, p.cliKey = testpki.WritePEM(t, p.dir, "client", ca.Issue(t, "client", x509.ExtKeyUsageClientAuth))
	return p
}

func TestConfigErrors(t *testing.T) {
	p := newPKI(t)
	if _, err := auth.ServerTLS(p.srvCert, "", ""); err == nil {
		t.Error("ServerTLS without a key succeeded")
	}
	if _, err := auth.ServerTLS(p.srvCert, p.srvKey, p.srvKey); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("ServerTLS with a key as client CA: %v", err)
	}
	if _, err := auth.ClientTLS(p.caFile, p.cliCert, "", ""); err == nil {
		t.Error("ClientTLS with a certificate but no key succeeded")
	}
	if _, err := auth.LoadTokens(filepath.Join(p.dir, "missing")); err == nil {
		t.Error("LoadTokens of a missing file succeeded")
	}
}
