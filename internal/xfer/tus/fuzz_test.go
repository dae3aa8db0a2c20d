package tus

import (
	"encoding/base64"
	"maps"
	"slices"
	"strings"
	"testing"
)

// FuzzTusMetadata: any Upload-Metadata header parses to pairs or an
// error, never a panic; pairs written back in the header's form parse
// to the same pairs.
func FuzzTusMetadata(f *testing.F) {
	for _, s := range []string{"", " ", "filename YS5iaW4=", "filename YS5iaW4=,is_confidential", "a ,b", "k !!!", ",", "k  YQ==", "a YQ==,a Yg=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseMetadata(s)
		if err != nil {
			return
		}
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if strings.ContainsAny(k, " ,") || k == "" {
				t.Fatalf("parsed a key a header cannot carry: %q", k)
			}
			pairs = append(pairs, k+" "+base64.StdEncoding.EncodeToString([]byte(m[k])))
		}
		back, err := parseMetadata(strings.Join(pairs, ","))
		if err != nil || !maps.Equal(back, m) {
			t.Fatalf("%q parsed to %v; written back it parses to %v, %v", s, m, back, err)
		}
	})
}
