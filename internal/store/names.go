package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// maxFileName bounds the names FileName produces, well under the 255 bytes
// file systems allow.
const maxFileName = 200

// FileName maps an agent id or a group name, which may hold any bytes, to a
// safe, unique file name: ASCII letters, digits, '_' and '-' are kept, and
// so is '.' except in first place (so "." and ".." cannot occur); every
// other byte becomes %XX. A result longer than maxFileName is replaced by
// "%%" and the SHA-256 of the input in hex, which escaping never produces
// ('%' is always followed by two hex digits there).
func FileName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > maxFileName {
		sum := sha256.Sum256([]byte(s))
		return "%%" + hex.EncodeToString(sum[:])
	}
	return b.String()
}
