package auth

import (
	"strings"
	"testing"
)

// FuzzParseTokens: a tokens file of any content parses or fails with an
// error, never a panic; every "TOKEN AGENT_ID" line of a file that
// parses looks up to its agent, and nothing else does.
func FuzzParseTokens(f *testing.F) {
	f.Add("# agents\n0123456789abcdef0123456789abcdef edge-1\n\nfedcba9876543210fedcba9876543210 edge-2\n")
	f.Add("short edge-1\n")
	f.Add("0123456789abcdef0123456789abcdef\n")
	f.Add("0123456789abcdef0123456789abcdef a b\n")
	f.Fuzz(func(t *testing.T, s string) {
		toks, err := ParseTokens(strings.NewReader(s))
		if err != nil {
			return
		}
		n := 0
		for _, line := range strings.Split(s, "\n") {
			fs := strings.Fields(line)
			if len(fs) == 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			n++
			if id, ok := toks.Lookup(fs[0]); !ok || id.AgentID != fs[1] {
				t.Fatalf("token of line %q looks up to %+v, %v", line, id, ok)
			}
		}
		if n != toks.Len() {
			t.Fatalf("%d token lines, %d tokens", n, toks.Len())
		}
		if _, ok := toks.Lookup(""); ok {
			t.Fatal("the empty token has an identity")
		}
	})
}
