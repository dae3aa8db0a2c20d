package main

import (
	"crypto/x509"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
)

// TestAgentIDFromCertificate: with a client certificate the agent takes
// its id from it (SPIFFE URI, else CN), the same rule the sink applies, and
// refuses a conflicting --agent-id or a reader's certificate at startup.
func TestAgentIDFromCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t)
	client := x509.ExtKeyUsageClientAuth
	spiffe, _ := testpki.WritePEM(t, dir, "spiffe", ca.Issue(t, "ignored-cn", client, "spiffe://example.org/agent/edge-7"))
	cn, _ := testpki.WritePEM(t, dir, "cn", ca.Issue(t, "edge-cn", client))
	reader, _ := testpki.WritePEM(t, dir, "reader", ca.Issue(t, "x", client, "spiffe://example.org/reader"))

	for _, c := range []struct {
		flagID, cert, want, err string
	}{
		{"", "", "", ""},
		{"mine", "", "mine", ""},
		{"", spiffe, "edge-7", ""},
		{"edge-7", spiffe, "edge-7", ""},
		{"", cn, "edge-cn", ""},
		{"other", spiffe, "", "differs from the id"},
		{"", reader, "", "reader's certificate"},
		{"", dir + "/missing.pem", "", "no such file"},
	} {
		got, err := agentIDFor(c.flagID, c.cert)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("agentIDFor(%q, %q) = %q, %v; want error containing %q", c.flagID, c.cert, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("agentIDFor(%q, %q) = %q, %v; want %q", c.flagID, c.cert, got, err, c.want)
		}
	}
}
