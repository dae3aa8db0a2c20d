package batch

import "testing"

// TestFramed: a Builder reset into a buffer with extra room hands out the
// body with the caller's header in front, in the same memory (no copy),
// gives the buffer up, and refuses a header larger than the room.
func TestFramed(t *testing.T) {
	var b Builder
	mem := make([]byte, 0, 4096)
	b.ResetInto(mem, 16)
	for _, r := range []string{"alpha", "", "gamma"} {
		if err := b.Add([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	want := append([]byte(nil), b.Bytes()...)
	if _, ok := b.Framed(17); ok {
		t.Fatal("Framed(17) with 16 bytes of room succeeded")
	}
	f, ok := b.Framed(10)
	if !ok {
		t.Fatal("Framed(10) failed")
	}
	if len(f) != 10+len(want) || string(f[10:]) != string(want) {
		t.Fatalf("framed %q, want 10 bytes then %q", f, want)
	}
	// Same memory: the body ends where the records end in the buffer
	// (16 bytes of room, the header's headroom, the records without the
	// 3-byte header of a 3-record batch).
	if end := 16 + headroom + len(want) - 3; &f[len(f)-1] != &mem[:cap(mem)][end-1] {
		t.Fatal("the framed body is not in the buffer given to ResetInto: it was copied")
	}
	if b.Cap() != 0 || b.Count() != 0 {
		t.Fatalf("after Framed: cap %d, count %d; want the buffer given up", b.Cap(), b.Count())
	}
	b.Reset()
	if err := b.Add([]byte("x")); err != nil || b.Count() != 1 {
		t.Fatalf("reuse after Framed: %v, count %d", err, b.Count())
	}
	if n, err := Count(b.Bytes()); err != nil || n != 1 {
		t.Fatalf("a batch built after Framed: %d records, %v", n, err)
	}
}
