package cli

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"
)

// help is what a command's -h prints: its usage line, then its flags.
func help(usage string, flags ...string) string {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	for _, f := range flags {
		fs.String(f, "", "the "+f)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Usage: sluice x %s\n\nFlags:\n", usage)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// TestUsageFindings: a usage line must name every flag (or say [flags])
// and only flags; `xfer serve`'s omitted --http, --expire, --idle-timeout,
// --max-partials and --log-level before.
func TestUsageFindings(t *testing.T) {
	for _, c := range []struct {
		usage string
		flags []string
		want  []string // substrings of the findings; none: ""
	}{
		{"--dir DIR [--grpc HOST:PORT] [--http-timeout D]", []string{"dir", "grpc", "http-timeout"}, nil},
		{"--dir DIR [--affinity=false]", []string{"dir", "affinity"}, nil},
		{"--url URL [flags]", []string{"url", "data", "metadata"}, nil},
		{"--dir DIR [--grpc HOST:PORT]", []string{"dir", "grpc", "http", "log-level"}, []string{"omits --http, --log-level"}},
		// --http is not named by --http-timeout.
		{"--dir DIR [--http-timeout D]", []string{"dir", "http", "http-timeout"}, []string{"omits --http "}},
		{"--dir DIR [--gone X] [flags]", []string{"dir"}, []string{"names --gone, which is not a flag"}},
		{"", nil, nil},
	} {
		got := UsageFindings(help(c.usage, c.flags...))
		if len(c.want) == 0 && got != "" {
			t.Errorf("%q with flags %v: findings %q, want none", c.usage, c.flags, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q with flags %v: findings %q, want %q", c.usage, c.flags, got, w)
			}
		}
	}
	if got := UsageFindings("Flags:\n  -x string\n"); got == "" {
		t.Error("help without a usage line: no finding")
	}
}
