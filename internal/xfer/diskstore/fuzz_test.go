package diskstore

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// FuzzSidecar: a sidecar file's bytes, however damaged, decode to a
// record that holds its invariants or to an error, never a panic. The
// body is fuzzed twice: as the file's raw bytes, and wrapped in a valid
// slot header (right length and CRC), so the JSON decoding and the
// checks behind the CRC are reached too; whole two-slot files are
// covered by the store's torn-write tests. A record that decodes encodes
// back to one that decodes equal.
func FuzzSidecar(f *testing.F) {
	r := &record{Seq: 3, ID: "0123456789abcdef", Name: "a.bin", Size: 100, Offset: 40, Hash: []byte{1, 2, 3},
		Meta: "filename YS5iaW4=", Created: time.Unix(1700000000, 0).UTC(), Updated: time.Unix(1700000001, 0).UTC()}
	slot, err := r.encode()
	if err != nil {
		f.Fatal(err)
	}
	// Bodies, not whole 4 KiB slots: the fuzzer minimizes every new
	// input, and a slot of zeros takes it minutes each.
	f.Add(slot[slotHeader : slotHeader+int(binary.BigEndian.Uint32(slot[4:]))])
	f.Add(slot[:slotHeader+8])
	f.Add([]byte(`{"seq":1,"offset":-1,"size":1,"hash":"AA=="}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(got *record) {
			if got.Offset < 0 || got.Size < 0 || got.Offset > got.Size || len(got.Hash) == 0 {
				t.Fatalf("decoded a record that breaks the invariants: %+v", got)
			}
			again, err := got.encode()
			if err != nil {
				return // too large for a slot: it could not have been written
			}
			back, err := decodeSlot(again)
			if err != nil {
				t.Fatalf("a decoded record does not decode after encoding: %v", err)
			}
			if !reflect.DeepEqual(normal(back), normal(got)) {
				t.Fatalf("round trip changed the record:\n%+v\n%+v", got, back)
			}
		}
		if got, _, err := decodeSidecar(b); err == nil {
			check(got)
		}
		if len(b) <= slotSize-slotHeader {
			s := make([]byte, slotSize)
			binary.BigEndian.PutUint32(s[0:], slotMagic)
			binary.BigEndian.PutUint32(s[4:], uint32(len(b)))
			binary.BigEndian.PutUint32(s[8:], xfer.CRC32C(b))
			copy(s[slotHeader:], b)
			if got, err := decodeSlot(s); err == nil {
				check(got)
			}
		}
	})
}

// normal makes a record comparable after a JSON round trip (nil and
// empty slices, monotonic clock readings).
func normal(r *record) record {
	c := *r
	if len(c.SHA256) == 0 {
		c.SHA256 = nil
	}
	c.Created, c.Updated = c.Created.Round(0), c.Updated.Round(0)
	return c
}
