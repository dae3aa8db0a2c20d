package ingest

import (
	"strings"
	"testing"
)

func TestSplitLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\nb\n", "a|b"}, {"a\nb", "a|b"}, {"\n\na\r\n", "a\r"}, {"", ""}, {"\n", ""},
	} {
		recs, err := splitLines(nil, []byte(tc.in), 100)
		var parts []string
		for _, r := range recs {
			parts = append(parts, string(r))
		}
		if err != nil || strings.Join(parts, "|") != tc.want {
			t.Errorf("%q → %q %v, want %q", tc.in, parts, err, tc.want)
		}
	}
}
