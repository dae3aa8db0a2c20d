package xfer

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "../x", "a/b", `a\b`, "x..y", ".hidden", "a\x00b", "a\nb", "bad\xffutf8", strings.Repeat("x", 201)} {
		if err := ValidateName(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("ValidateName(%q) = %v, want ErrBadName", bad, err)
		}
	}
	for _, ok := range []string{"a", "file.tar.gz", "a b", "ünïcode", "x.y"} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q) = %v", ok, err)
		}
	}
}
