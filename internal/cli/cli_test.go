package cli

import "testing"

func TestUnprefixed(t *testing.T) {
	for _, c := range []struct{ name, msg, want string }{
		{"sink", "sink: mkdir x: not a directory", "mkdir x: not a directory"},
		{"agent", "agent: spool x is damaged", "spool x is damaged"},
		{"log check", "log: no log in x", "no log in x"},
		{"xfer send", "xfer: send: refused", "refused"},
		{"sink", "sinking: x", "sinking: x"},
	} {
		if got := unprefixed(c.name, c.msg); got != c.want {
			t.Errorf("unprefixed(%q, %q) = %q, want %q", c.name, c.msg, got, c.want)
		}
	}
}
