package tus

import (
	"encoding/base64"
	"maps"
	"net/url"
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

// FuzzTusConcat: any Upload-Concat header parses to partial, or to final
// with 1 to maxConcatParts ids, or to an error, never a panic; an id
// never holds a "/" (it could address something else than an upload),
// and the ids written back as a header parse to the same ids.
func FuzzTusConcat(f *testing.F) {
	for _, s := range []string{"", "partial", "final;", "final;/files/a /files/b", "final;http://h:1/files/a%2Fb",
		"final; http://x/files/ab  /files/cd ", "final;/other/a", "final;/files/", "whole", "final;::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind, ids, err := parseConcat(s, "/files/")
		if err != nil || kind != concatFinal {
			if err == nil && ids != nil {
				t.Fatalf("%q: kind %d with ids %v", s, kind, ids)
			}
			return
		}
		if len(ids) == 0 || len(ids) > maxConcatParts {
			t.Fatalf("%q: %d ids", s, len(ids))
		}
		urls := make([]string, len(ids))
		for i, id := range ids {
			if id == "" || strings.Contains(id, "/") {
				t.Fatalf("%q: id %q", s, id)
			}
			urls[i] = "/files/" + url.PathEscape(id)
		}
		_, back, err := parseConcat("final;"+strings.Join(urls, " "), "/files/")
		if err != nil || !slices.Equal(back, ids) {
			t.Fatalf("%q parsed to %q; written back it parses to %q, %v", s, ids, back, err)
		}
	})
}

// FuzzTusChecksumAlgorithms: any Tus-Checksum-Algorithm value the client
// reads (listsAlgorithm) never panics; it lists crc32c only when crc32c
// is one of its comma-separated fields, and crc32c added as a field is
// always found, wherever the list puts it.
func FuzzTusChecksumAlgorithms(f *testing.F) {
	for _, s := range []string{"", "sha1,sha256,md5,crc32c", "crc32c", " crc32c ", "crc32", "crc32c2", "sha1, crc32c", ",,", "CRC32C"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if listsAlgorithm(s, "crc32c") && !strings.Contains(s, "crc32c") {
			t.Fatalf("%q lists crc32c", s)
		}
		if !listsAlgorithm(s+",crc32c", "crc32c") || !listsAlgorithm("crc32c,"+s, "crc32c") {
			t.Fatalf("crc32c added to %q is not found", s)
		}
	})
}
