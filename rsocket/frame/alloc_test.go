package frame

import (
	"bytes"
	"testing"
)

// TestZeroAllocs: encoding into a buffer with capacity, parsing, and reading
// length-prefixed frames into a reused buffer do not allocate.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	buf := make([]byte, 0, 4096)
	// The measurement itself works: encoding into a nil buffer allocates.
	if n := testing.AllocsPerRun(10, func() { _, _ = AppendCancel(nil, 1) }); n == 0 {
		t.Fatal("AllocsPerRun saw no allocation for an append to a nil slice")
	}
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			frame := unhex(t, g.hex)
			if n := testing.AllocsPerRun(100, func() {
				if _, err := g.encode(buf[:0]); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("encode: %v allocs", n)
			}
			// "grows dst at most once": from nil, exactly one allocation.
			if n := testing.AllocsPerRun(100, func() {
				if _, err := g.encode(nil); err != nil {
					t.Fatal(err)
				}
			}); n != 1 {
				t.Errorf("encode into nil: %v allocs, want 1", n)
			}
			if n := testing.AllocsPerRun(100, func() {
				if _, err := Validate(frame); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("Validate: %v allocs", n)
			}
		})
	}
	// The typed Parse functions, called directly (parseAny would box).
	ps, _ := AppendPayload(nil, 1, FlagNext, []byte("m"), []byte("data"))
	rs, _ := AppendRequestStream(nil, 1, 0, 5, []byte("m"), []byte("data"))
	st, _ := AppendSetup(nil, Setup{KeepaliveInterval: 1, MaxLifetime: 1, ResumeToken: []byte("t"), DataMIME: []byte("a/b")})
	if n := testing.AllocsPerRun(100, func() {
		p, err1 := ParsePayload(ps)
		r, err2 := ParseRequestStream(rs)
		s, err3 := ParseSetup(st)
		if err1 != nil || err2 != nil || err3 != nil || len(p.Data) != 4 || r.InitialN != 5 || len(s.DataMIME) != 3 {
			t.Fatal("parse failed")
		}
	}); n != 0 {
		t.Errorf("Parse*: %v allocs", n)
	}
	// Length-prefixed reads into a reused buffer.
	var stream []byte
	for i := 0; i < 200; i++ {
		stream, _ = AppendLengthPrefix(stream, len(ps))
		stream = append(stream, ps...)
	}
	rd := bytes.NewReader(stream)
	rbuf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		f, err := ReadLengthPrefixed(rd, rbuf, 0)
		if err != nil || len(f) != len(ps) {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ReadLengthPrefixed: %v allocs", n)
	}
}
