package extension

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The fuzz targets check that no input panics, that failures are
// *MalformedError, and that what decodes re-encodes to the same bytes
// (composite entries by id stay by id, strings stay strings).

func FuzzComposite(f *testing.F) {
	for _, s := range compositeSeeds {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		it := Composite(b)
		var out []byte
		for it.Next() {
			e := it.Entry()
			var err error
			if e.WellKnown {
				out, err = AppendCompositeWellKnown(out, e.ID, e.Metadata)
			} else {
				out = append(out, byte(len(e.CustomMIME)-1))
				out = append(out, e.CustomMIME...)
				out = append(out, byte(len(e.Metadata)>>16), byte(len(e.Metadata)>>8), byte(len(e.Metadata)))
				out = append(out, e.Metadata...)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := it.Err(); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, input %x", out, b)
		}
	})
}

func FuzzRouting(f *testing.F) {
	for _, s := range routingSeeds {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		it := Routing(b)
		var out []byte
		for it.Next() {
			var err error
			if out, err = AppendRoutingTag(out, string(it.Tag())); err != nil {
				t.Fatal(err)
			}
		}
		if err := it.Err(); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, input %x", out, b)
		}
	})
}

func FuzzAuth(f *testing.F) {
	for _, s := range authSeeds {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAuth(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		var out []byte
		switch {
		case a.Is(AuthSimple):
			u, p, err := a.Simple()
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("unclassified error %v", err)
				}
				return
			}
			out, err = AppendAuthSimple(nil, string(u), string(p))
			if err != nil {
				t.Fatal(err)
			}
		case a.WellKnown:
			out, _ = AppendAuthWellKnown(nil, a.ID, a.Payload)
		default:
			out = append([]byte{byte(len(a.CustomType) - 1)}, a.CustomType...)
			out = append(out, a.Payload...)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, input %x", out, b)
		}
	})
}

var (
	compositeSeeds = []string{goldenComposite, "", "d0 000000", "7f" + "6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d" +
		"6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d" +
		"6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d6d 000000", "85 000005 61"}
	routingSeeds = []string{"02 2f61 00", "", "05 61", "ff"}
	authSeeds    = []string{"80 0001 75 7077", "81 746f6b", "00 78 70", "80 0005 61", "", "05 61"}
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seed files")

// TestSeedCorpus keeps testdata/fuzz in step with the seed lists above
// (write with -update-corpus).
func TestSeedCorpus(t *testing.T) {
	for target, seeds := range map[string][]string{"FuzzComposite": compositeSeeds, "FuzzRouting": routingSeeds, "FuzzAuth": authSeeds} {
		dir := filepath.Join("testdata", "fuzz", target)
		for i, s := range seeds {
			name := filepath.Join(dir, "seed-"+strconv.Itoa(i))
			content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(unhex(t, s))) + ")\n"
			if *updateCorpus {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if got, err := os.ReadFile(name); err != nil || string(got) != content {
				t.Errorf("seed %s missing or stale (run with -update-corpus): %v", name, err)
			}
		}
	}
}
