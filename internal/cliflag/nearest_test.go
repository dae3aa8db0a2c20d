package cliflag

import (
	"flag"
	"testing"
)

// The did-you-mean of an unknown flag: a typo within the edit distance,
// a swap counting one, a prefix of exactly one flag; nothing for a name
// unlike any flag.
func TestNearestFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	for _, n := range []string{"agent", "spool", "spool-quota", "sink", "data", "dict", "log-level"} {
		fs.String(n, "", "")
	}
	for _, c := range []struct{ typo, want string }{
		{"agnet", "agent"}, {"agen", "agent"}, {"spol", "spool"}, {"spool-qouta", "spool-quota"},
		{"snik", "sink"}, {"dtaa", "data"}, {"log-lvl", "log-level"}, {"loglevel", "log-level"},
		{"zzzz", ""}, {"x", ""}, {"verbose", ""}, {"spool-q", "spool-quota"},
	} {
		if got := Nearest(fs, c.typo); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.typo, got, c.want)
		}
	}
	if d := editDistance("agnet", "agent"); d != 1 {
		t.Errorf("editDistance(agnet, agent) = %d, want 1 (a swap)", d)
	}
}
