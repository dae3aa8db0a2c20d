package auth_test

import (
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

func TestConfigErrors(t *testing.T) {
	p := testpki.WriteFiles(t)
	if _, err := auth.ServerTLS(p.ServerCert, "", ""); err == nil {
		t.Error("ServerTLS without a key succeeded")
	}
	if _, err := auth.ServerTLS(p.ServerCert, p.ServerKey, p.ServerKey); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("ServerTLS with a key as client CA: %v", err)
	}
	if _, err := auth.ClientTLS(p.CA, p.ClientCert, "", ""); err == nil {
		t.Error("ClientTLS with a certificate but no key succeeded")
	}
	if _, err := auth.LoadTokens(filepath.Join(p.Dir, "missing")); err == nil {
		t.Error("LoadTokens of a missing file succeeded")
	}
}
