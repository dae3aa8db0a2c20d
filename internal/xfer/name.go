package xfer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen bounds a name well below common file-system limits (255).
const MaxNameLen = 200

// ValidateName refuses a name that could land anywhere but directly in
// DIR: empty, ".", "..", containing "/", "\", "..", NUL or other control
// characters, or starting with "." (which would also hide .partial).
func ValidateName(name string) error {
	switch {
	case name == "":
		return &NameError{Name: name, Why: "empty"}
	case len(name) > MaxNameLen:
		return &NameError{Name: name[:32] + "...", Why: fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	case strings.ContainsAny(name, "/\\"):
		return &NameError{Name: name, Why: `contains "/" or "\"`}
	case strings.Contains(name, ".."):
		return &NameError{Name: name, Why: `contains ".."`}
	case strings.HasPrefix(name, "."):
		return &NameError{Name: name, Why: `starts with "."`}
	case !utf8.ValidString(name):
		// The sidecar (JSON) could not keep it byte for byte.
		return &NameError{Name: strings.ToValidUTF8(name, "?"), Why: "not valid UTF-8"}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return &NameError{Name: name, Why: "contains a control character"}
		}
	}
	return nil
}

// NameError is a refused name; it matches ErrBadName.
type NameError struct {
	Name, Why string
}

func (e *NameError) Error() string        { return fmt.Sprintf("bad name %q: %s", e.Name, e.Why) }
func (e *NameError) Is(target error) bool { return target == ErrBadName }
