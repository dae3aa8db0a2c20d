package defaults

import "testing"

func TestPlural(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Plural(0, "message"), "0 messages"},
		{Plural(1, "message"), "1 message"},
		{Plural(uint64(12282), "record"), "12282 records"},
		{Plural(int64(1), "byte"), "1 byte"},
		{Plural(2, "offset holds", "offsets hold"), "2 offsets hold"},
		{Plural(1, "offset holds", "offsets hold"), "1 offset holds"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
