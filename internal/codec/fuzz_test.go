package codec

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// fuzzMaxSize is the Decoder limit under fuzzing: small, so that oversized
// output is easy to reach.
const fuzzMaxSize = 64 << 10

// fuzzUnknownID is a dictionary id the fuzzed Decoder never holds.
const fuzzUnknownID = 0x7fff0001

// FuzzDecode feeds arbitrary bytes to Decode as every kind. Decode must not
// panic, must classify every error, must leave dst alone on error, must
// respect its limit, and whatever it accepts must be exactly what zstd's own
// DecodeAll (which accepts more) makes of the same bytes.
//
// The seed corpus in testdata/fuzz/FuzzDecode holds valid frames with and
// without the committed dictionary (testdata/dict.zdict), truncated and
// damaged ones, and oversized ones; regenerate it with
// go test -run TestWriteFuzzCorpus -update-corpus ./internal/codec/.
func FuzzDecode(f *testing.F) {
	dict := testDict(f)
	d := NewDecoder(fuzzMaxSize)
	if err := d.AddDictionary(dict); err != nil {
		f.Fatal(err)
	}
	ref, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(fuzzMaxSize),
		zstd.WithDecoderDicts(dict.Data))
	if err != nil {
		f.Fatal(err)
	}
	defer ref.Close()
	f.Add([]byte{})

	cases := []struct {
		kind Kind
		id   uint32
	}{{Plain, 0}, {Zstd, 0}, {ZstdDict, dict.ID}, {ZstdDict, fuzzUnknownID}}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tc := range cases {
			out, err := d.Decode([]byte("dst"), data, tc.kind, tc.id)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnknownDictionary) {
					t.Fatalf("%v: unclassified error: %v", tc.kind, err)
				}
				if tc.id == fuzzUnknownID && !errors.Is(err, ErrUnknownDictionary) {
					t.Fatalf("%v with unknown dictionary: %v", tc.kind, err)
				}
				if string(out) != "dst" {
					t.Fatalf("%v: dst changed on error: %q", tc.kind, out)
				}
				continue
			}
			if tc.id == fuzzUnknownID {
				t.Fatal("decoded with a dictionary the Decoder does not hold")
			}
			if !bytes.HasPrefix(out, []byte("dst")) {
				t.Fatalf("%v: dst prefix lost", tc.kind)
			}
			body := out[3:]
			if len(body) > fuzzMaxSize {
				t.Fatalf("%v: %d bytes, limit %d", tc.kind, len(body), fuzzMaxSize)
			}
			if tc.kind == Plain {
				if !bytes.Equal(body, data) {
					t.Fatal("plain changed the body")
				}
				continue
			}
			want, err := ref.DecodeAll(data, nil)
			if err != nil {
				t.Fatalf("%v: Decode accepted what zstd rejects (%v)", tc.kind, err)
			}
			if !bytes.Equal(body, want) {
				t.Fatalf("%v: Decode gave %d bytes, zstd %d", tc.kind, len(body), len(want))
			}
		}
	})
}

// FuzzParseDictionary feeds arbitrary bytes to ParseDictionary, which reads
// dictionaries uploaded by agents: it must not panic, must classify its
// errors, and what it accepts must be usable by a Decoder and an Encoder.
func FuzzParseDictionary(f *testing.F) {
	valid := testDict(f).Data
	f.Add(valid)
	f.Add(valid[:200])
	f.Add([]byte(dictMagic + "\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDictionary(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidDictionary) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		if d.ID == 0 || !bytes.Equal(d.Data, data) {
			t.Fatalf("accepted with id %d", d.ID)
		}
		if err := NewDecoder(1 << 10).AddDictionary(d); err != nil {
			t.Fatalf("Decoder refuses what ParseDictionary accepted: %v", err)
		}
		e := NewEncoder(LevelFastest)
		if err := e.AddDictionary(d); err != nil {
			t.Fatalf("Encoder refuses what ParseDictionary accepted: %v", err)
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzDecode (and testdata/dict.zdict if missing)")

// TestWriteFuzzCorpus regenerates FuzzDecode's seed corpus when run with
// -update-corpus. The dictionary is trained only if testdata/dict.zdict is
// missing, since every dictionary frame in the corpus refers to it.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to regenerate the seed corpus")
	}
	if _, err := os.Stat(fuzzDictPath); errors.Is(err, os.ErrNotExist) {
		d, err := Train(newMetricsGen(1, 20, 2000).messages(64, 2<<10), 4<<10)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fuzzDictPath, d.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dict := testDict(t)
	e := NewEncoder(LevelDefault)
	if err := e.AddDictionary(dict); err != nil {
		t.Fatal(err)
	}
	gen := newMetricsGen(1, 21, 2000)
	enc := func(src []byte, kind Kind) []byte {
		id := uint32(0)
		if kind == ZstdDict {
			id = dict.ID
		}
		return mustEncode(t, e, src, kind, id)
	}
	stream := func(src []byte) []byte { return streamFrame(t, src, 32<<10) }
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[(i+len(b))%len(b)] ^= 0x55
		return b
	}
	metrics := gen.message(1 << 10)
	dictFrame := enc(gen.message(2<<10), ZstdDict)
	// The frame names its dictionary in the 4 bytes after the magic and
	// descriptors; point it at another id.
	otherDict := bytes.Clone(dictFrame)
	if i := bytes.Index(otherDict, le32(dict.ID)); i > 0 {
		copy(otherDict[i:], le32(dict.ID+1))
	} else {
		t.Fatal("dictionary id not found in frame header")
	}
	zstdFrame := enc(metrics, Zstd)
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'a', 'b', 'c', 'd'}

	seeds := map[string][]byte{
		"valid-zstd-empty":           enc(nil, Zstd),
		"valid-zstd-metrics":         zstdFrame,
		"valid-zstd-multiblock":      enc(bytes.Repeat(metrics, 150), Zstd),
		"valid-zstd-raw-block":       enc(randomBytes(rand.New(rand.NewPCG(22, 22)), 300), Zstd),
		"valid-zstd-rle-block":       enc(bytes.Repeat([]byte{'a'}, 5000), Zstd),
		"valid-zstd-stream-no-size":  stream(gen.message(3 << 10)),
		"valid-dict-metrics":         dictFrame,
		"valid-dict-empty":           enc(nil, ZstdDict),
		"valid-dict-small":           enc(metrics[:200], ZstdDict),
		"truncated-zstd-header":      zstdFrame[:5],
		"truncated-zstd-half":        zstdFrame[:len(zstdFrame)/2],
		"truncated-zstd-checksum":    zstdFrame[:len(zstdFrame)-2],
		"truncated-dict-half":        dictFrame[:len(dictFrame)/2],
		"bad-zstd-checksum":          flip(zstdFrame, -1),
		"bad-zstd-literals":          flip(zstdFrame, 20),
		"bad-dict-content":           flip(dictFrame, len(dictFrame)/2),
		"bad-dict-other-id":          otherDict,
		"bad-two-frames":             append(bytes.Clone(zstdFrame), zstdFrame...),
		"bad-trailing-byte":          append(bytes.Clone(zstdFrame), 0),
		"bad-skippable":              skippable,
		"bad-skippable-then-frame":   append(bytes.Clone(skippable), zstdFrame...),
		"bad-dictionary-not-a-frame": dict.Data[:64],
		"oversize-zeros-1M":          enc(make([]byte, 1<<20), Zstd),
		"oversize-stream-no-size":    stream(make([]byte, 1<<20)),
		"plain-text":                 metrics[:100],
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d seeds to %s", len(seeds), dir)
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
