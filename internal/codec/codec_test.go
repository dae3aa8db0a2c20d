package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// fuzzDictPath is a small committed dictionary, so the fuzz corpus's
// dictionary frames stay decodable: Train is not deterministic.
const fuzzDictPath = "testdata/dict.zdict"

// testDict returns the committed dictionary.
func testDict(tb testing.TB) Dictionary {
	tb.Helper()
	data, err := os.ReadFile(fuzzDictPath)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := ParseDictionary(data)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

var (
	trainedOnce sync.Once
	trained     Dictionary
	trainedErr  error
)

// trainedDict returns a dictionary trained in this run on a small sample,
// shared by the tests that need a second one.
func trainedDict(tb testing.TB) Dictionary {
	tb.Helper()
	trainedOnce.Do(func() {
		trained, trainedErr = Train(newMetricsGen(1, 7, 2000).messages(64, 2<<10), 8<<10)
	})
	if trainedErr != nil {
		tb.Fatal(trainedErr)
	}
	return trained
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// mustEncode encodes or fails the test.
func mustEncode(tb testing.TB, e *Encoder, src []byte, kind Kind, id uint32) []byte {
	tb.Helper()
	out, err := e.Encode(nil, src, kind, id)
	if err != nil {
		tb.Fatalf("Encode(%v, %d): %v", kind, id, err)
	}
	return out
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Plain: "plain", Zstd: "zstd", ZstdDict: "zstd_dict", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
	for l, want := range map[Level]string{LevelDefault: "default", LevelFastest: "fastest", LevelBetter: "better", 7: "Level(7)"} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", uint8(l), got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	dict := testDict(t)
	gen := newMetricsGen(1, 9, 500)
	inputs := map[string][]byte{
		"empty":        {},
		"one-byte":     {'x'},
		"metrics-300":  gen.message(300),
		"metrics-16K":  gen.message(16 << 10),
		"metrics-300K": gen.message(300 << 10), // several zstd blocks
		"random-1K":    randomBytes(r, 1<<10),
		"random-200K":  randomBytes(r, 200<<10), // incompressible, several blocks
		"zeros-1M":     make([]byte, 1<<20),     // exactly maxSize
	}
	for _, level := range []Level{LevelDefault, LevelFastest, LevelBetter} {
		e := NewEncoder(level)
		if err := e.AddDictionary(dict); err != nil {
			t.Fatal(err)
		}
		d := NewDecoder(1 << 20)
		if err := d.AddDictionary(dict); err != nil {
			t.Fatal(err)
		}
		for name, src := range inputs {
			for _, kind := range []Kind{Plain, Zstd, ZstdDict} {
				id := uint32(0)
				if kind == ZstdDict {
					id = dict.ID
				}
				prefix := []byte("prefix")
				enc, err := e.Encode(bytes.Clone(prefix), src, kind, id)
				if err != nil {
					t.Fatalf("%v/%s/%v: Encode: %v", level, name, kind, err)
				}
				if !bytes.HasPrefix(enc, prefix) {
					t.Fatalf("%v/%s/%v: Encode clobbered dst", level, name, kind)
				}
				enc = enc[len(prefix):]
				if kind == Plain && !bytes.Equal(enc, src) {
					t.Fatalf("%v/%s: Plain changed the body", level, name)
				}
				dec, err := d.Decode(bytes.Clone(prefix), enc, kind, id)
				if err != nil {
					t.Fatalf("%v/%s/%v: Decode: %v", level, name, kind, err)
				}
				if !bytes.Equal(dec, append(prefix, src...)) {
					t.Fatalf("%v/%s/%v: round trip differs (len %d, want %d)", level, name, kind, len(dec)-len(prefix), len(src))
				}
				if kind != Plain {
					var h zstd.Header
					if err := h.Decode(enc); err != nil || !h.HasFCS || h.FrameContentSize != uint64(len(src)) || h.DictionaryID != id && len(src) > 0 {
						t.Fatalf("%v/%s/%v: frame header %+v, %v: want content size %d and dictionary %d", level, name, kind, h, err, len(src), id)
					}
				}
			}
		}
	}
}

// TestRoundTripRandom round-trips random-length slices of random and
// metrics data through every kind.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	dict := trainedDict(t)
	e := NewEncoder(LevelDefault)
	d := NewDecoder(1 << 20)
	if err := e.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	if err := d.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	gen := newMetricsGen(1, 10, 2000)
	var enc, dec []byte
	for i := range 300 {
		n := r.IntN(1 << uint(r.IntN(18)))
		var src []byte
		if i%2 == 0 {
			src = randomBytes(r, n)
		} else {
			src = gen.message(n)
		}
		kind := []Kind{Plain, Zstd, ZstdDict}[i%3]
		id := uint32(0)
		if kind == ZstdDict {
			id = dict.ID
		}
		var err error
		if enc, err = e.Encode(enc[:0], src, kind, id); err != nil {
			t.Fatal(err)
		}
		if dec, err = d.Decode(dec[:0], enc, kind, id); err != nil {
			t.Fatalf("message %d (%v, %d bytes): %v", i, kind, n, err)
		}
		if !bytes.Equal(dec, src) {
			t.Fatalf("message %d (%v, %d bytes): round trip differs", i, kind, n)
		}
	}
}

// TestDecodeInPlace checks that Decode uses dst's spare capacity instead of
// allocating, and grows dst once when it has none.
func TestDecodeInPlace(t *testing.T) {
	src := newMetricsGen(1, 11, 500).message(8 << 10)
	enc := mustEncode(t, NewEncoder(LevelDefault), src, Zstd, 0)
	d := NewDecoder(1 << 20)

	dst := make([]byte, 3, 64<<10)
	out, err := d.Decode(dst, enc, Zstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &dst[0] {
		t.Error("Decode reallocated although dst had room")
	}
	if !bytes.Equal(out[3:], src) {
		t.Error("wrong output")
	}

	tight := []byte{1, 2, 3}
	out, err = d.Decode(tight[:3:3], enc, Zstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:3], []byte{1, 2, 3}) || !bytes.Equal(out[3:], src) {
		t.Error("wrong output when growing dst")
	}
}

func TestDictionaryRoundTrip(t *testing.T) {
	dict := trainedDict(t)
	gen := newMetricsGen(1, 12, 2000)
	e := NewEncoder(LevelDefault)
	if err := e.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	// The sink side gets the dictionary over the wire.
	wire, err := ParseDictionary(bytes.Clone(dict.Data))
	if err != nil {
		t.Fatal(err)
	}
	if wire.ID != dict.ID {
		t.Fatalf("ParseDictionary id %d, trained %d", wire.ID, dict.ID)
	}
	d := NewDecoder(1 << 20)
	if d.HasDictionary(dict.ID) {
		t.Fatal("HasDictionary before AddDictionary")
	}
	if err := d.AddDictionary(wire); err != nil {
		t.Fatal(err)
	}
	if !d.HasDictionary(dict.ID) || !e.HasDictionary(dict.ID) {
		t.Fatal("HasDictionary false after AddDictionary")
	}
	var plainSize, dictSize int
	for range 20 {
		src := gen.message(2 << 10)
		withDict := mustEncode(t, e, src, ZstdDict, dict.ID)
		plainSize += len(mustEncode(t, e, src, Zstd, 0))
		dictSize += len(withDict)
		out, err := d.Decode(nil, withDict, ZstdDict, dict.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, src) {
			t.Fatal("round trip differs")
		}
	}
	// A sanity check that the dictionary is used at all; the benchmark
	// measures by how much.
	if dictSize >= plainSize {
		t.Errorf("dictionary made 2 KB messages no smaller: %d bytes with, %d without", dictSize, plainSize)
	}
}

func TestUnknownAndWrongDictionary(t *testing.T) {
	a := testDict(t)
	b := trainedDict(t)
	if a.ID == b.ID {
		t.Fatal("test dictionaries share an id")
	}
	src := newMetricsGen(1, 13, 500).message(4 << 10)
	e := NewEncoder(LevelDefault)
	if _, err := e.Encode(nil, src, ZstdDict, a.ID); !errors.Is(err, ErrUnknownDictionary) {
		t.Fatalf("Encode with a dictionary never added: %v, want ErrUnknownDictionary", err)
	}
	for _, dict := range []Dictionary{a, b} {
		if err := e.AddDictionary(dict); err != nil {
			t.Fatal(err)
		}
	}
	frameA := mustEncode(t, e, src, ZstdDict, a.ID)

	// A Decoder without the dictionary: retryable error naming the id.
	d := NewDecoder(1 << 20)
	_, err := d.Decode(nil, frameA, ZstdDict, a.ID)
	if !errors.Is(err, ErrUnknownDictionary) {
		t.Fatalf("unknown dictionary: %v, want ErrUnknownDictionary", err)
	}
	t.Logf("unknown dictionary: %v", err)

	// A dictionary frame sent as plain zstd, or labelled with another
	// dictionary the Decoder holds: the frame contradicts the message.
	if err := d.AddDictionary(b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind Kind
		id   uint32
	}{{Zstd, 0}, {ZstdDict, b.ID}} {
		_, err := d.Decode(nil, frameA, tc.kind, tc.id)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("dictionary-%d frame decoded as %v/%d: %v, want ErrCorrupt", a.ID, tc.kind, tc.id, err)
		}
		t.Logf("mislabelled frame: %v", err)
	}

	// The wrong bytes under the right id (forged: b's content with a's
	// id). The checksum catches the garbage this decodes to.
	forged := Dictionary{ID: a.ID, Data: bytes.Clone(b.Data)}
	binary.LittleEndian.PutUint32(forged.Data[4:8], a.ID)
	d2 := NewDecoder(1 << 20)
	if err := d2.AddDictionary(forged); err != nil {
		t.Fatal(err)
	}
	out, err := d2.Decode(nil, frameA, ZstdDict, a.ID)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decoding with the wrong dictionary: %v (output equal: %v), want ErrCorrupt", err, bytes.Equal(out, src))
	}
	t.Logf("wrong dictionary: %v", err)
}

func TestAddDictionary(t *testing.T) {
	a := testDict(t)
	b := trainedDict(t)
	mismatched := Dictionary{ID: a.ID + 1, Data: a.Data}
	conflicting := Dictionary{ID: a.ID, Data: bytes.Clone(b.Data)}
	binary.LittleEndian.PutUint32(conflicting.Data[4:8], a.ID)

	type adder interface {
		AddDictionary(Dictionary) error
		HasDictionary(uint32) bool
	}
	for name, x := range map[string]adder{"Encoder": NewEncoder(LevelDefault), "Decoder": NewDecoder(1 << 20)} {
		for _, bad := range []Dictionary{{}, {ID: 5}, {ID: 5, Data: []byte("not a dictionary")}, mismatched} {
			if err := x.AddDictionary(bad); !errors.Is(err, ErrInvalidDictionary) {
				t.Errorf("%s.AddDictionary(id %d, %d bytes): %v, want ErrInvalidDictionary", name, bad.ID, len(bad.Data), err)
			}
		}
		if err := x.AddDictionary(a); err != nil {
			t.Fatal(err)
		}
		if err := x.AddDictionary(Dictionary{ID: a.ID, Data: bytes.Clone(a.Data)}); err != nil {
			t.Errorf("%s: adding the same dictionary again: %v", name, err)
		}
		if err := x.AddDictionary(conflicting); !errors.Is(err, ErrDictionaryConflict) {
			t.Errorf("%s: different bytes under a known id: %v, want ErrDictionaryConflict", name, err)
		}
		if !x.HasDictionary(a.ID) || x.HasDictionary(a.ID+1) || x.HasDictionary(0) {
			t.Errorf("%s: HasDictionary wrong", name)
		}
	}
}

func TestTrain(t *testing.T) {
	gen := newMetricsGen(1, 14, 2000)
	if _, err := Train(gen.messages(MinTrainSamples-1, 2<<10), 8<<10); err == nil {
		t.Error("Train with too few samples succeeded")
	} else {
		t.Logf("too few samples: %v", err)
	}
	few := append(gen.messages(MinTrainSamples-1, 2<<10), nil, []byte{}, nil)
	if _, err := Train(few, 8<<10); err == nil {
		t.Error("Train counted empty samples")
	}
	tiny := make([][]byte, 20)
	for i := range tiny {
		tiny[i] = []byte{byte(i), 1, 2, 3, 4, 5}
	}
	if _, err := Train(tiny, 4<<10); err == nil {
		t.Error("Train on samples shorter than 8 bytes succeeded")
	} else {
		t.Logf("tiny samples: %v", err)
	}
	for _, size := range []int{0, MinDictionarySize - 1, MaxDictionarySize + 1} {
		if _, err := Train(gen.messages(32, 2<<10), size); err == nil {
			t.Errorf("Train with size %d succeeded", size)
		}
	}

	d := trainedDict(t)
	if d.ID < privateIDMin || d.ID > privateIDMax {
		t.Errorf("id %d outside the private range", d.ID)
	}
	if got := binary.LittleEndian.Uint32(d.Data[4:8]); got != d.ID {
		t.Errorf("header id %d, Dictionary.ID %d", got, d.ID)
	}
	if got := contentID(d.Data); got != d.ID {
		t.Errorf("id %d is not derived from the content (%d)", d.ID, got)
	}
	if len(d.Data) > 8<<10+2<<10 {
		t.Errorf("asked for 8 KiB, got %d bytes", len(d.Data))
	}
}

func TestParseDictionary(t *testing.T) {
	valid := testDict(t).Data
	cases := map[string][]byte{
		"nil":       nil,
		"empty":     {},
		"magic":     []byte(dictMagic),
		"text":      []byte("hello, this is not a zstd dictionary at all"),
		"zstdframe": mustEncode(t, NewEncoder(LevelDefault), []byte("a frame, not a dictionary"), Zstd, 0),
		"id-zero":   append(append([]byte(dictMagic), 0, 0, 0, 0), valid[8:]...),
		"huge":      append(bytes.Clone(valid), make([]byte, MaxDictionarySize+(64<<10))...),
		"no-tables": append([]byte(dictMagic), 1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
	// Every truncation inside the entropy tables and offsets, then a
	// sample of the content (which loads at any length).
	for n := range valid {
		if n < 1024 || n%97 == 0 {
			cases["truncated-"+strconv.Itoa(n)] = valid[:n]
		}
	}
	r := rand.New(rand.NewPCG(3, 3))
	for i := range 200 {
		g := bytes.Clone(valid[:200+r.IntN(800)])
		for range 1 + r.IntN(8) {
			g[8+r.IntN(len(g)-8)] = byte(r.Uint32())
		}
		cases["flipped-"+strconv.Itoa(i)] = g
	}
	accepted := 0
	for name, data := range cases {
		d, err := ParseDictionary(data)
		if err == nil {
			accepted++
			if d.ID == 0 || !bytes.Equal(d.Data, data) {
				t.Errorf("%s: accepted with id %d", name, d.ID)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidDictionary) {
			t.Errorf("%s: %v does not wrap ErrInvalidDictionary", name, err)
		}
		if !strings.HasPrefix(name, "truncated") && !strings.HasPrefix(name, "flipped") {
			t.Logf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"nil", "empty", "magic", "text", "zstdframe", "id-zero", "huge", "no-tables"} {
		if _, err := ParseDictionary(cases[name]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	t.Logf("%d of %d damaged inputs still load as dictionaries (truncated content or flipped table bits can be valid)", accepted, len(cases))

	d, err := ParseDictionary(valid)
	if err != nil {
		t.Fatal(err)
	}
	d.Data[100] ^= 1
	if valid[100] == d.Data[100] {
		t.Error("ParseDictionary did not copy its input")
	}
}

func TestInvalidKind(t *testing.T) {
	e := NewEncoder(LevelDefault)
	d := NewDecoder(1 << 10)
	for _, tc := range []struct {
		kind Kind
		id   uint32
	}{{0, 0}, {5, 0}, {255, 0}, {Plain, 7}, {Zstd, 7}, {KafkaZstd, 7}, {ZstdDict, 0}} {
		if _, err := e.Encode(nil, []byte("x"), tc.kind, tc.id); !errors.Is(err, errKind) {
			t.Errorf("Encode(%v, %d): %v", tc.kind, tc.id, err)
		}
		want := errKind
		if tc.kind == ZstdDict {
			// Dictionary id 0 comes from the wire: a bad message.
			want = ErrCorrupt
		}
		if _, err := d.Decode(nil, []byte("x"), tc.kind, tc.id); !errors.Is(err, want) {
			t.Errorf("Decode(%v, %d): %v, want %v", tc.kind, tc.id, err, want)
		}
	}
	for _, f := range []func(){func() { NewEncoder(9) }, func() { NewDecoder(0) }, func() { NewDecoder(-1) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic on an invalid constructor argument")
				}
			}()
			f()
		}()
	}
}

// TestDecodeMalformed covers frames the Decoder must refuse even though
// zstd's DecodeAll would accept them.
func TestDecodeMalformed(t *testing.T) {
	e := NewEncoder(LevelDefault)
	src := []byte(strings.Repeat("sluice ", 100))
	frame := mustEncode(t, e, src, Zstd, 0)
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'a', 'b', 'c', 'd'}
	d := NewDecoder(1 << 20)
	for name, in := range map[string][]byte{
		"empty":           {},
		"garbage":         []byte("definitely not zstd"),
		"two frames":      append(bytes.Clone(frame), frame...),
		"trailing byte":   append(bytes.Clone(frame), 0),
		"skippable":       skippable,
		"skippable+frame": append(bytes.Clone(skippable), frame...),
		"frame+skippable": append(bytes.Clone(frame), skippable...),
		"truncated":       frame[:len(frame)-1],
	} {
		out, err := d.Decode([]byte("keep"), in, Zstd, 0)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", name, out)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestDecodeCorruptEveryByte damages a small frame at every byte: Decode
// must fail, or (when the damage hits a field that does not change the
// result, such as the window size of a small frame) return exactly the
// original body; it must never panic or return different bytes.
func TestDecodeCorruptEveryByte(t *testing.T) {
	dict := testDict(t)
	e := NewEncoder(LevelDefault)
	if err := e.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(1 << 20)
	if err := d.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	src := newMetricsGen(1, 15, 200).message(600)
	for _, tc := range []struct {
		kind Kind
		id   uint32
	}{{Zstd, 0}, {ZstdDict, dict.ID}} {
		frame := mustEncode(t, e, src, tc.kind, tc.id)
		harmless, tried := 0, 0
		var out []byte
		for i := range frame {
			for _, x := range []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff} {
				bad := bytes.Clone(frame)
				bad[i] ^= x
				tried++
				var err error
				out, err = d.Decode(out[:0], bad, tc.kind, tc.id)
				switch {
				case err == nil && !bytes.Equal(out, src):
					t.Fatalf("%v: byte %d ^ %#x: decoded to different bytes without error", tc.kind, i, x)
				case err == nil:
					harmless++
				case !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownDictionary):
					t.Fatalf("%v: byte %d ^ %#x: unclassified error %v", tc.kind, i, x, err)
				}
			}
		}
		for n := range len(frame) {
			if _, err := d.Decode(nil, frame[:n], tc.kind, tc.id); err == nil {
				t.Fatalf("%v: frame truncated to %d of %d bytes decoded", tc.kind, n, len(frame))
			}
		}
		t.Logf("%v: %d-byte frame: %d of %d single-byte corruptions decode to the original body (header fields that do not affect it), the rest fail; all %d truncations fail",
			tc.kind, len(frame), harmless, tried, len(frame))
	}
}

// allocated returns the bytes allocated by f.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestDecodeTooLarge(t *testing.T) {
	const maxSize = 1 << 20
	zeros := make([]byte, 10<<20)
	e := NewEncoder(LevelDefault)
	bomb := mustEncode(t, e, zeros, Zstd, 0)
	t.Logf("10 MB of zeros: %d-byte frame", len(bomb))

	d := NewDecoder(maxSize)
	if _, err := d.Decode(nil, bomb, Zstd, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("10 MB frame, 1 MB limit: %v, want ErrTooLarge", err)
	}
	const runs = 20
	perRun := allocated(func() {
		for range runs {
			_, _ = d.Decode(nil, bomb, Zstd, 0)
		}
	}) / runs
	t.Logf("rejecting it allocates %d bytes", perRun)
	if perRun > 4<<10 {
		t.Errorf("rejecting a frame that declares 10 MB allocated %d bytes; it should be refused from its header", perRun)
	}

	// Frames without a declared size, as streaming encoders write them.
	// With zstd's default 8 MB window the header alone gives it away; with
	// a small window decoding must stop near the limit instead of
	// producing 10 MB.
	for _, window := range []int{8 << 20, 64 << 10} {
		stream := streamFrame(t, zeros, window)
		var h zstd.Header
		if err := h.Decode(stream); err != nil || h.HasFCS {
			t.Fatalf("streamed frame header %+v, %v: want no content size", h, err)
		}
		if _, err := d.Decode(nil, stream, Zstd, 0); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("10 MB streamed frame, window %d, 1 MB limit: %v, want ErrTooLarge", window, err)
		}
		perRun = allocated(func() {
			for range 5 {
				_, _ = d.Decode(nil, stream, Zstd, 0)
			}
		}) / 5
		t.Logf("rejecting a 10 MB frame without content size, window %d: %d bytes allocated", window, perRun)
		// zstd grows the output by appending, so the garbage is about
		// twice the final capacity plus its block buffers: bounded by
		// the limit, not by what the frame would expand to.
		if perRun > 8*maxSize {
			t.Errorf("rejecting a 10 MB frame without content size allocated %d bytes, want a small multiple of the 1 MB limit", perRun)
		}
	}

	// The limit is inclusive, for every kind.
	for _, n := range []int{maxSize, maxSize + 1} {
		body := make([]byte, n)
		for _, kind := range []Kind{Plain, Zstd} {
			_, err := d.Decode(nil, mustEncode(t, e, body, kind, 0), kind, 0)
			if n <= maxSize && err != nil {
				t.Errorf("%v, %d bytes, limit %d: %v", kind, n, maxSize, err)
			}
			if n > maxSize && !errors.Is(err, ErrTooLarge) {
				t.Errorf("%v, %d bytes, limit %d: %v, want ErrTooLarge", kind, n, maxSize, err)
			}
		}
	}
	// The limit applies to what is appended, not to len(dst).
	full := make([]byte, maxSize, 2*maxSize+1)
	if _, err := d.Decode(full, mustEncode(t, e, make([]byte, maxSize), Zstd, 0), Zstd, 0); err != nil {
		t.Errorf("appending maxSize bytes to a non-empty dst: %v", err)
	}
}

// TestNoAllocs checks the steady state the Encoder and Decoder are built for:
// reused dst with room, warmed-up zstd state.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	if testing.Short() {
		t.Skip("allocation counts: skipped with -short")
	}
	dict := testDict(t)
	e := NewEncoder(LevelDefault)
	d := NewDecoder(1 << 20)
	if err := e.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	if err := d.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	src := newMetricsGen(1, 16, 2000).message(16 << 10)
	enc := make([]byte, 0, 64<<10)
	dec := make([]byte, 0, 64<<10)
	for _, tc := range []struct {
		kind Kind
		id   uint32
	}{{Plain, 0}, {Zstd, 0}, {ZstdDict, dict.ID}} {
		var err error
		if enc, err = e.Encode(enc[:0], src, tc.kind, tc.id); err != nil {
			t.Fatal(err)
		}
		frame := bytes.Clone(enc)
		if a := testing.AllocsPerRun(50, func() { enc, _ = e.Encode(enc[:0], src, tc.kind, tc.id) }); a != 0 {
			t.Errorf("Encode %v: %.1f allocs/op, want 0", tc.kind, a)
		}
		if a := testing.AllocsPerRun(50, func() { dec, _ = d.Decode(dec[:0], frame, tc.kind, tc.id) }); a != 0 {
			t.Errorf("Decode %v: %.1f allocs/op, want 0", tc.kind, a)
		}
	}
}

// streamFrame compresses src as zstd's streaming encoder does: one frame
// without a content size, with the given window.
func streamFrame(tb testing.TB, src []byte, window int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(window))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(src); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// TestParseLevel: every level's name parses back to it; anything else is
// a clear error.
func TestParseLevel(t *testing.T) {
	for _, l := range []Level{LevelDefault, LevelFastest, LevelBetter} {
		if got, err := ParseLevel(l.String()); err != nil || got != l {
			t.Errorf("ParseLevel(%q) = %v, %v", l.String(), got, err)
		}
	}
	if _, err := ParseLevel("max"); err == nil || !strings.Contains(err.Error(), "want default, fastest or better") {
		t.Errorf("ParseLevel(max): %v", err)
	}
}

// TestKafkaZstdIsAZstdFrame: KafkaZstd differs from Zstd only in what the
// decompressed bytes are and in the frame's checksum, which it leaves out
// (kafkaChecksum), so both directions treat it as a zstd frame without a
// dictionary; a KafkaZstd frame with the checksum (an older agent's, or one
// still in its spool) decodes too.
func TestKafkaZstdIsAZstdFrame(t *testing.T) {
	e := NewEncoder(LevelDefault)
	d := NewDecoder(1 << 20)
	src := bytes.Repeat([]byte("kafka records "), 100)
	enc, err := e.Encode(nil, src, KafkaZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	zs, err := e.Encode(nil, src, Zstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	var hk, hz zstd.Header
	if err := hk.Decode(enc); err != nil {
		t.Fatal(err)
	}
	if err := hz.Decode(zs); err != nil {
		t.Fatal(err)
	}
	if hk.HasCheckSum || !hz.HasCheckSum {
		t.Errorf("checksum in the KafkaZstd frame %v, in the Zstd frame %v; want false, true", hk.HasCheckSum, hz.HasCheckSum)
	}
	if !hk.HasFCS || hk.FrameContentSize != uint64(len(src)) {
		t.Errorf("KafkaZstd frame declares %v %d bytes, want %d", hk.HasFCS, hk.FrameContentSize, len(src))
	}
	for _, c := range []struct {
		name  string
		frame []byte
	}{{"KafkaZstd frame", enc}, {"KafkaZstd frame with a checksum", zs}} {
		for _, k := range []Kind{KafkaZstd, Zstd} {
			got, err := d.Decode(nil, c.frame, k, 0)
			if err != nil || !bytes.Equal(got, src) {
				t.Fatalf("Decode of a %s as %v: %v, equal %v", c.name, k, err, bytes.Equal(got, src))
			}
		}
	}
	if KafkaZstd.String() != "kafka_zstd" {
		t.Errorf("String() = %q", KafkaZstd.String())
	}
}

// TestEncoderOneDictionaryLessState: an Encoder switching between Zstd
// and KafkaZstd holds one zstd state at a time (each is 1.6–3.7 MB,
// BenchmarkZstdState), and both kinds' frames still decode after the
// switches.
func TestEncoderOneDictionaryLessState(t *testing.T) {
	e := NewEncoder(LevelDefault)
	d := NewDecoder(1 << 20)
	src := bytes.Repeat([]byte("switching kinds "), 200)
	for i, k := range []Kind{Zstd, KafkaZstd, KafkaZstd, Zstd, KafkaZstd} {
		frame, err := e.Encode(nil, src, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := e.States(); n != 1 {
			t.Fatalf("message %d (%v): the Encoder holds %d zstd states, want 1", i, k, n)
		}
		if got, err := d.Decode(nil, frame, k, 0); err != nil || !bytes.Equal(got, src) {
			t.Fatalf("message %d (%v): %v, equal %v", i, k, err, bytes.Equal(got, src))
		}
	}
}

// TestReadDictionaryFile: a missing file and one that is no dictionary
// are errors naming the file; a trained one reads back with its id.
func TestReadDictionaryFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadDictionaryFile(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("not a dictionary"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDictionaryFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("not a dictionary: %v, want an error naming %s", err, bad)
	}
	var samples [][]byte
	for i := range 2000 {
		samples = append(samples, fmt.Appendf(nil, `{"host":"h%d","metric":"cpu_seconds_total","value":%d}`, i%50, i))
	}
	d, err := Train(samples, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, d.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadDictionaryFile(good); err != nil || got.ID != d.ID {
		t.Errorf("trained dictionary: id %d, %v; want id %d", got.ID, err, d.ID)
	}
}

// TestParseAgentKind: the agent's --compression names, and a clear error
// for any other.
func TestParseAgentKind(t *testing.T) {
	for s, want := range map[string]Kind{"plain": Plain, "zstd": Zstd, "dict": ZstdDict} {
		if k, err := ParseAgentKind(s); err != nil || k != want {
			t.Errorf("%q: %v, %v; want %v", s, k, err, want)
		}
	}
	for _, s := range []string{"", "none", "zstd_dict", "ZSTD", "kafka_zstd"} {
		if _, err := ParseAgentKind(s); err == nil || !strings.Contains(err.Error(), "want plain, zstd or dict") {
			t.Errorf("%q: %v, want an error listing the names", s, err)
		}
	}
}
