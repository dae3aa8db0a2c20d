package extension

import "testing"

// TestZeroAllocs: decoding iterators and views, and encoding into a buffer
// with capacity, do not allocate.
func TestZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	comp := unhex(t, goldenComposite)
	routing := unhex(t, "02 2f61 00")
	simple := unhex(t, "80 0001 75 7077")
	buf := make([]byte, 0, 256)
	md := []byte("{}")
	for name, f := range map[string]func(){
		"composite decode": func() {
			it := Composite(comp)
			n := 0
			for it.Next() {
				if it.Entry().IsMIME("x/y") || it.Entry().MIME() != "" {
					n++
				}
			}
			if n != 3 || it.Err() != nil {
				t.Fatal("composite")
			}
		},
		"find composite": func() {
			if _, ok, _ := FindComposite(comp, "x/y"); !ok {
				t.Fatal("find")
			}
		},
		"routing decode": func() {
			it := Routing(routing)
			for it.Next() {
			}
			if it.Err() != nil {
				t.Fatal("routing")
			}
		},
		"auth decode": func() {
			a, _ := ParseAuth(simple)
			if u, _, err := a.Simple(); err != nil || len(u) != 1 {
				t.Fatal("auth")
			}
		},
		"composite encode": func() {
			b, _ := AppendCompositeEntry(buf[:0], "application/json", md)
			b, _ = AppendCompositeEntry(b, "x/y", md)
			_ = b
		},
		"routing encode": func() { _, _ = AppendRouting(buf[:0], "/a", "/b") },
		"auth encode": func() {
			_, _ = AppendAuthSimple(buf[:0], "user", "pass")
			_ = AppendAuthBearer(buf[:0], "token")
			_, _ = AppendAuthCustom(buf[:0], "x-auth", md)
		},
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs", name, n)
		}
	}
}
