package cliflag

import (
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	reNoValue   = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
	reBadValue  = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]*): (.*)$`)
)

// Message rewords an error of fs.Parse: flags spelled --name as in
// the docs, and an unknown flag with the nearest of fs's flags.
func Message(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		if near := Nearest(fs, m[1]); near != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", m[1], near)
		}
		return fmt.Sprintf("unknown flag --%s", m[1])
	}
	if m := reNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value", m[1])
	}
	if m := reBadValue.FindStringSubmatch(msg); m != nil {
		why := m[3]
		if f := fs.Lookup(m[2]); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				why = "want true or false"
			}
		}
		return fmt.Sprintf("--%s %s: %s", m[2], m[1], why)
	}
	return msg
}

// ParseRate reads a link rate: bits with a "bit" suffix (1Gbit, 40Mbit,
// 500kbit) or bytes with the byte-size suffixes (25MB, 3MiB, 1000).
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"kbit", 1e3}, {"Kbit", 1e3}, {"bit", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(t, u.suffix), 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("bad rate %q", s)
			}
			return int64(v * u.mult / 8), nil
		}
	}
	n, err := ParseSize(t)
	if err != nil {
		return 0, fmt.Errorf("bad rate %q: want e.g. 1Gbit, 40Mbit or 25MB", s)
	}
	return n, nil
}
