package extension

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden composite metadata, from Extensions/CompositeMetadata.md and
// WellKnownMimeTypes.md, with rsocket-java's length-1 custom MIME length:
//
//	85 000002 7b7d       application/json (id 0x05 | 0x80), 2 bytes "{}"
//	fe 000002 0161       routing (0x7e | 0x80), routing metadata [tag "a"]
//	02 782f79 000001 41  custom "x/y": 3 bytes written as 2, 1 byte "A"
const goldenComposite = "85 000002 7b7d fe 000002 0161 02 782f79 000001 41"

func TestCompositeGolden(t *testing.T) {
	var b []byte
	var err error
	b, err = AppendCompositeEntry(b, "application/json", []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err = AppendCompositeWellKnown(b, MIMERSocketRouting, []byte{1, 'a'}); err != nil {
		t.Fatal(err)
	}
	if b, err = AppendCompositeEntry(b, "x/y", []byte("A")); err != nil {
		t.Fatal(err)
	}
	want := unhex(t, goldenComposite)
	if !bytes.Equal(b, want) {
		t.Fatalf("encode:\n got %x\nwant %x", b, want)
	}
	type ent struct {
		mime string
		wk   bool
		md   string
	}
	var got []ent
	it := Composite(want)
	for it.Next() {
		e := it.Entry()
		got = append(got, ent{e.MIME(), e.WellKnown, string(e.Metadata)})
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	wantEnts := []ent{{"application/json", true, "{}"}, {RoutingMIME, true, "\x01a"}, {"x/y", false, "A"}}
	if len(got) != len(wantEnts) {
		t.Fatalf("got %v", got)
	}
	for i := range got {
		if got[i] != wantEnts[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], wantEnts[i])
		}
	}
	e, ok, err := FindComposite(want, RoutingMIME)
	if !ok || err != nil {
		t.Fatalf("FindComposite: %v %v", ok, err)
	}
	route, ok, err := FirstRoute(e.Metadata)
	if !ok || err != nil || string(route) != "a" {
		t.Fatalf("FirstRoute = %q %v %v", route, ok, err)
	}
}

// TestCompositeCustomMIMELength: 128-byte types fit (0x7f = 128-1), which
// rsocket-java writes and rsocket-go refuses; 129 and 0 are refused.
func TestCompositeCustomMIMELength(t *testing.T) {
	mime := strings.Repeat("m", 128)
	b, err := AppendCompositeCustom(nil, mime, nil)
	if err != nil || b[0] != 0x7f {
		t.Fatalf("128-byte MIME: %x %v", b[:1], err)
	}
	it := Composite(b)
	if !it.Next() || !it.Entry().IsMIME(mime) || it.Entry().Metadata == nil || len(it.Entry().Metadata) != 0 {
		t.Fatalf("decode 128-byte MIME: %+v %v", it.Entry(), it.Err())
	}
	if _, err := AppendCompositeCustom(nil, mime+"m", nil); !errors.Is(err, ErrTooLong) {
		t.Fatalf("129 bytes: %v", err)
	}
	if _, err := AppendCompositeCustom(nil, "", nil); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := AppendCompositeCustom(nil, "text/é", nil); !errors.Is(err, ErrNotASCII) {
		t.Fatalf("non-ASCII: %v", err)
	}
	// A well-known id missing from the table is returned, to be skipped.
	it = Composite(unhex(t, "d0 000000 85 000000"))
	if !it.Next() || it.Entry().ID != 0x50 || it.Entry().ID.Known() || it.Entry().MIME() != "" {
		t.Fatalf("reserved id: %+v", it.Entry())
	}
	if !it.Next() || !it.Entry().IsMIME("application/json") || it.Next() || it.Err() != nil {
		t.Fatal("entry after a reserved id")
	}
}

func TestMIMETable(t *testing.T) {
	n := 0
	for id := MIMEType(0); id <= MaxMIMEType; id++ {
		name := id.String()
		if name == "" {
			continue
		}
		n++
		if got, ok := LookupMIME(name); !ok || got != id {
			t.Errorf("LookupMIME(%q) = %v, %v", name, got, ok)
		}
	}
	if n != 0x2B+6 {
		t.Errorf("%d well-known MIME types, want 49 (0x00-0x2a, 0x7a-0x7f)", n)
	}
	for id, name := range map[MIMEType]string{MIMEApplicationAvro: "application/avro", MIMEApplicationFlatbuffers: "application/x-flatbuffers",
		MIMEVideoH264: "video/H264", MIMEApplicationCloudEventJSON: "application/cloudevents+json",
		MIMERSocketComposite: "message/x.rsocket.composite-metadata.v0", MIMERSocketAuthentication: "message/x.rsocket.authentication.v0"} {
		if id.String() != name {
			t.Errorf("0x%x = %q, want %q", uint8(id), id.String(), name)
		}
	}
	if _, ok := LookupMIME("Application/JSON"); ok {
		t.Error("lookup is case-sensitive, as rsocket-java's")
	}
}

func TestRoutingGolden(t *testing.T) {
	// Tags "/a" and "" (Extensions/Routing.md: u8 length + UTF-8).
	want := unhex(t, "02 2f61 00")
	b, err := AppendRouting(nil, "/a", "")
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("encode %x %v, want %x", b, err, want)
	}
	var tags []string
	it := Routing(want)
	for it.Next() {
		tags = append(tags, string(it.Tag()))
	}
	if it.Err() != nil || len(tags) != 2 || tags[0] != "/a" || tags[1] != "" {
		t.Fatalf("decode %q %v", tags, it.Err())
	}
	if _, err := AppendRoutingTag(nil, strings.Repeat("t", 256)); !errors.Is(err, ErrTooLong) {
		t.Fatalf("256-byte tag: %v", err)
	}
	if b, err := AppendRouting([]byte("k"), "ok", strings.Repeat("t", 256)); err == nil || string(b) != "k" {
		t.Fatalf("AppendRouting on error returned %q, %v", b, err)
	}
}

func TestAuthGolden(t *testing.T) {
	for _, tc := range []struct {
		name, hex string
		enc       func() ([]byte, error)
		check     func(Auth) bool
	}{
		// Simple (0x00|0x80): u16 username length 1, "u", password "pw".
		{"simple", "80 0001 75 7077", func() ([]byte, error) { return AppendAuthSimple(nil, "u", "pw") }, func(a Auth) bool {
			u, p, err := a.Simple()
			return err == nil && string(u) == "u" && string(p) == "pw"
		}},
		// Bearer (0x01|0x80): the token is the rest.
		{"bearer", "81 746f6b", func() ([]byte, error) { return AppendAuthBearer(nil, "tok"), nil }, func(a Auth) bool {
			tok, ok := a.Bearer()
			return ok && string(tok) == "tok"
		}},
		// Custom type "x": 1 byte written as 0, then "x", payload "p".
		{"custom", "00 78 70", func() ([]byte, error) { return AppendAuthCustom(nil, "x", []byte("p")) }, func(a Auth) bool {
			return !a.WellKnown && string(a.CustomType) == "x" && string(a.Payload) == "p"
		}},
		// "bearer" by name is written by id.
		{"bearer by name", "81 74", func() ([]byte, error) { return AppendAuthCustom(nil, "bearer", []byte("t")) }, func(a Auth) bool {
			return a.Is(AuthBearer)
		}},
		{"simple empty", "80 0000", func() ([]byte, error) { return AppendAuthSimple(nil, "", "") }, func(a Auth) bool {
			u, p, err := a.Simple()
			return err == nil && len(u) == 0 && len(p) == 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := unhex(t, tc.hex)
			b, err := tc.enc()
			if err != nil || !bytes.Equal(b, want) {
				t.Fatalf("encode %x %v, want %x", b, err, want)
			}
			a, err := ParseAuth(want)
			if err != nil || !tc.check(a) {
				t.Fatalf("decode %+v %v", a, err)
			}
		})
	}
	if _, err := AppendAuthSimple(nil, strings.Repeat("u", 65536), ""); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long username: %v", err)
	}
	if _, err := AppendAuthCustom(nil, strings.Repeat("a", 129), nil); !errors.Is(err, ErrTooLong) {
		t.Fatalf("long type: %v", err)
	}
}

func TestMalformedExtensions(t *testing.T) {
	for _, tc := range []struct {
		name, hex string
		f         func([]byte) error
	}{
		{"composite MIME cut", "02 78", compositeErr},
		{"composite length cut", "85 0000", compositeErr},
		{"composite metadata cut", "85 000005 61", compositeErr},
		{"composite 2nd entry bad", "85 000000 85 ffffff", compositeErr},
		{"routing tag cut", "05 61", routingErr},
		{"auth empty", "", authErr},
		{"auth type cut", "05 61", authErr},
		{"simple no length", "80 00", authErr},
		{"simple username cut", "80 0005 61", authErr},
		{"simple on bearer", "81 0000", authErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f(unhex(t, tc.hex))
			var me *MalformedError
			if !errors.Is(err, ErrMalformed) || !errors.As(err, &me) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func compositeErr(b []byte) error {
	it := Composite(b)
	for it.Next() {
	}
	return it.Err()
}

func routingErr(b []byte) error {
	it := Routing(b)
	for it.Next() {
	}
	return it.Err()
}

func authErr(b []byte) error {
	a, err := ParseAuth(b)
	if err != nil {
		return err
	}
	_, _, err = a.Simple()
	return err
}

// TestCompositeRandomRoundTrip: random entries encode and decode back.
func TestCompositeRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 2000; i++ {
		type ent struct {
			mime string
			md   []byte
		}
		var ents []ent
		var b []byte
		for j := r.IntN(5); j > 0; j-- {
			var e ent
			if r.IntN(2) == 0 {
				e.mime = MIMEType(r.IntN(0x2B)).String()
			} else {
				e.mime = "x/" + strings.Repeat("q", r.IntN(127))
			}
			e.md = make([]byte, r.IntN(40))
			for k := range e.md {
				e.md[k] = byte(r.Uint32())
			}
			var err error
			if b, err = AppendCompositeEntry(b, e.mime, e.md); err != nil {
				t.Fatal(err)
			}
			ents = append(ents, e)
		}
		it := Composite(b)
		k := 0
		for ; it.Next(); k++ {
			if !it.Entry().IsMIME(ents[k].mime) || !bytes.Equal(it.Entry().Metadata, ents[k].md) {
				t.Fatalf("entry %d: %+v, want %+v", k, it.Entry(), ents[k])
			}
		}
		if it.Err() != nil || k != len(ents) {
			t.Fatalf("%d entries of %d, %v", k, len(ents), it.Err())
		}
	}
}
