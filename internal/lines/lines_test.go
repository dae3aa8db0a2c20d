package lines

import (
	"reflect"
	"testing"
)

// Split drops empty lines (the client refuses empty records) and keeps a
// last line without its newline.
func TestSplit(t *testing.T) {
	got := Split([]byte("a\n\nbc\n\nd"))
	want := [][]byte{[]byte("a"), []byte("bc"), []byte("d")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Split = %q, want %q", got, want)
	}
	if got := Split([]byte("\n\n")); got != nil {
		t.Fatalf("Split of empty lines = %q, want none", got)
	}
}
