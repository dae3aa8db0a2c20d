package cliflag

import "testing"

// TestParseSizeOrShare: a size as ParseSize reads it, or a share of the
// whole from above 0 % to 100 %, never below one byte.
func TestParseSizeOrShare(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{"50%", 500}, {"100%", 1000}, {"0.01%", 1}, {" 25 %", 250}, {"64KiB", 64 << 10}, {"7", 7}} {
		if got, err := ParseSizeOrShare(c.in, 1000); err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"0%", "101%", "-1%", "%", "NaN%", "half", "-5"} {
		if n, err := ParseSizeOrShare(in, 1000); err == nil {
			t.Errorf("%q: %d, want an error", in, n)
		}
	}
}
