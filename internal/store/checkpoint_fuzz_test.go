package store

import (
	"reflect"
	"testing"
)

// FuzzParseCheckpoint: a damaged dedup checkpoint is an error (the sink
// then rescans the store), never a panic, and whatever parses re-encodes
// to an equivalent checkpoint.
func FuzzParseCheckpoint(f *testing.F) {
	d := NewDedup()
	d.Next = 42
	for _, id := range []uint64{0, 1, 2, 5, 6, 9} {
		d.set("agent-a").add(id)
	}
	d.set("agent-b").add(7)
	f.Add(d.AppendCheckpoint(nil))
	f.Add(NewDedup().AppendCheckpoint(nil))
	f.Add([]byte("SDC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseCheckpoint(b)
		if err != nil {
			return
		}
		again, err := ParseCheckpoint(d.AppendCheckpoint(nil))
		if err != nil {
			t.Fatalf("re-encoded checkpoint does not parse: %v", err)
		}
		if !reflect.DeepEqual(again, d) {
			t.Fatal("checkpoint does not round-trip")
		}
	})
}
