package wire

import "testing"

// ParseOffset reads what FormatOffset prints, and refuses what cannot be
// packed.
func TestParseOffset(t *testing.T) {
	for s, want := range map[string]uint64{"0": 0, "42": 42, "0:7": 7, "3:5": 3<<KafkaOffsetBits | 5} {
		got, err := ParseOffset(s)
		if err != nil || got != want {
			t.Errorf("ParseOffset(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	if s := FormatOffset(3<<KafkaOffsetBits | 5); s != "3:5" {
		t.Errorf("FormatOffset = %q, want 3:5", s)
	}
	for _, s := range []string{"", "x", "-1", "1:", "70000:1", "1:281474976710656"} {
		if _, err := ParseOffset(s); err == nil {
			t.Errorf("ParseOffset(%q) accepted", s)
		}
	}
}
