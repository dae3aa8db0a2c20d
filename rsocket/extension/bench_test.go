package extension

import "testing"

// go test -run XXX -bench . -benchmem ./rsocket/extension/
func BenchmarkComposite(b *testing.B) {
	md := []byte("{}")
	buf := make([]byte, 0, 256)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _ := AppendCompositeEntry(buf[:0], "application/json", md)
			out, _ = AppendCompositeWellKnown(out, MIMERSocketRouting, md)
			_, _ = AppendCompositeCustom(out, "x/y", md)
		}
	})
	comp := []byte{0x85, 0, 0, 2, '{', '}', 0xfe, 0, 0, 2, 1, 'a', 2, 'x', '/', 'y', 0, 0, 1, 'A'}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			it := Composite(comp)
			for it.Next() {
			}
			if it.Err() != nil {
				b.Fatal(it.Err())
			}
		}
	})
}

func BenchmarkRoutingAndAuth(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.Run("routing encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = AppendRoutingTag(buf[:0], "/records/append")
		}
	})
	r, _ := AppendRoutingTag(nil, "/records/append")
	b.Run("routing decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, _ := FirstRoute(r); !ok {
				b.Fatal("no route")
			}
		}
	})
	a, _ := AppendAuthSimple(nil, "agent-1", "secret")
	b.Run("simple auth decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			au, _ := ParseAuth(a)
			if _, _, err := au.Simple(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
