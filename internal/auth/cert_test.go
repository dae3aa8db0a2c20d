package auth_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
)

func TestCertIdentity(t *testing.T) {
	for _, tc := range []struct {
		cn    string
		uris  []string
		want  string // agent id, "*" for a reader, "" for an error
		canRd bool
	}{
		{cn: "edge-1", want: "edge-1"},
		{cn: "ignored", uris: []string{"spiffe://example.org/agent/edge-2"}, want: "edge-2"},
		{cn: "edge-1", uris: []string{"spiffe://example.org/reader"}, want: auth.ReaderID, canRd: true},
		{cn: auth.ReaderCN, want: auth.ReaderID, canRd: true},
		{cn: "x", uris: []string{"https://example.org/agent/x", "spiffe://td/agent/y"}, want: "y"}, // non-SPIFFE URIs are ignored
		{cn: "x", uris: []string{"spiffe://td/agent/a", "spiffe://td/agent/b"}},                    // two identities
		{cn: "x", uris: []string{"spiffe://td/workload/a"}},                                        // unknown shape
		{cn: "x", uris: []string{"spiffe://td/agent/"}},                                            // empty id
		{cn: ""},            // nothing
		{cn: auth.ReaderID}, // "*" is no agent id
	} {
		cert := &x509.Certificate{Subject: pkix.Name{CommonName: tc.cn}}
		for _, u := range tc.uris {
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			cert.URIs = append(cert.URIs, pu)
		}
		id, err := auth.CertIdentity(cert)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("CN %q URIs %v: identity %q, want an error", tc.cn, tc.uris, id.AgentID)
		case tc.want != "" && (err != nil || id.AgentID != tc.want || id.CanRead() != tc.canRd):
			t.Errorf("CN %q URIs %v: %+v, %v; want %q", tc.cn, tc.uris, id, err, tc.want)
		}
	}
}
