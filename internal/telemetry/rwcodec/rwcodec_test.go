package rwcodec

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// staleNaN is Prometheus' stale marker: a NaN with particular bits,
// which a lossy codec would turn into an ordinary NaN.
const staleNaN = 0x7ff0000000000002

type testSample struct {
	bits uint64
	ts   int64
}

// testSeries marshals a TimeSeries as Prometheus' marshaller does:
// labels, then samples, proto3 zero values omitted.
func testSeries(labels []string, samples ...testSample) []byte {
	var ts []byte
	for i := 0; i+1 < len(labels); i += 2 {
		var l []byte
		if labels[i] != "" {
			l = protowire.AppendTag(l, 1, protowire.BytesType)
			l = protowire.AppendString(l, labels[i])
		}
		if labels[i+1] != "" {
			l = protowire.AppendTag(l, 2, protowire.BytesType)
			l = protowire.AppendString(l, labels[i+1])
		}
		ts = protowire.AppendTag(ts, 1, protowire.BytesType)
		ts = protowire.AppendBytes(ts, l)
	}
	for _, s := range samples {
		var b []byte
		if s.bits != 0 {
			b = protowire.AppendTag(b, 1, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, s.bits)
		}
		if s.ts != 0 {
			b = protowire.AppendTag(b, 2, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(s.ts))
		}
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, b)
	}
	return ts
}

func testRequest(series ...[]byte) []byte {
	var req []byte
	for _, s := range series {
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, s)
	}
	return req
}

func f(v float64) uint64 { return math.Float64bits(v) }

// scrape is one scrape's worth of series as Prometheus sends them: the
// same labels over and over, one timestamp, counters, gauges, durations.
func scrape() []byte {
	const t = 1764290000123
	var series [][]byte
	values := []float64{0, 1, 42, 1234567, 0.5, 0.001234567, 3.14159, -2.5, 1e300, 12.000000001, math.Inf(1), math.Inf(-1), math.NaN()}
	for i, v := range values {
		series = append(series, testSeries(
			[]string{"__name__", "go_gc_duration_seconds", "instance", "127.0.0.1:9090", "job", "self", "quantile", string(rune('a' + i))},
			testSample{f(v), t}))
	}
	series = append(series,
		testSeries([]string{"__name__", "up", "job", "self"}, testSample{staleNaN, t + 1000}, testSample{f(math.Copysign(0, -1)), t + 2000}, testSample{f(1), 0}),
		testSeries([]string{"", "empty name", "empty value", ""}, testSample{0, -5}),
		testSeries(nil),
	)
	return testRequest(series...)
}

// TestCodecRoundTripsExactly: a request with the values a lossy codec
// gets wrong (stale-marker NaN, -0, infinities, values that are not
// short decimals, a zero timestamp, a negative one, empty label names
// and values, a series with nothing) is encoded, smaller, and decodes to
// the same bytes.
func TestCodecRoundTripsExactly(t *testing.T) {
	body := scrape()
	enc, ok := Encode(body)
	if !ok {
		t.Fatal("Encode declined a request it carries")
	}
	if len(enc) >= len(body) {
		t.Fatalf("encoded %d bytes, protobuf %d", len(enc), len(body))
	}
	dec, err := Decode(enc)
	if err != nil || !bytes.Equal(dec, body) {
		t.Fatalf("Decode = %x, %v; want %x", dec, err, body)
	}
}

// TestCodecDeclinesWhatItDoesNotCarry: metadata, exemplars, histograms,
// unknown fields and a layout other than Prometheus' marshaller's (a
// zero value written out, samples before labels) are declined, so the
// caller stores the protobuf as it came.
func TestCodecDeclinesWhatItDoesNotCarry(t *testing.T) {
	labels := testSeries([]string{"__name__", "up", "job", "self"})
	sample := testSeries(nil, testSample{f(1), 1000})
	withField := func(b []byte, num protowire.Number) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, []byte{0x08, 0x01})
	}
	zeroValue := protowire.AppendTag(nil, 1, protowire.Fixed64Type)
	zeroValue = protowire.AppendFixed64(zeroValue, 0)
	zeroValueSample := protowire.AppendTag(labels, 2, protowire.BytesType)
	zeroValueSample = protowire.AppendBytes(zeroValueSample, zeroValue)
	cases := map[string][]byte{
		"metadata":          withField(testRequest(append(labels, sample...)), 3),
		"exemplar":          testRequest(withField(append(labels, sample...), 3)),
		"histogram":         testRequest(withField(append(labels, sample...), 4)),
		"unknown field":     testRequest(withField(append(labels, sample...), 9)),
		"zero written out":  testRequest(zeroValueSample),
		"samples first":     testRequest(append(append([]byte{}, sample...), labels...)),
		"not protobuf":      {0xff, 0xff},
		"empty":             nil,
		"truncated series":  testRequest(append(labels, sample...))[:10],
		"varint value type": testRequest(append(labels, 0x12, 0x02, 0x08, 0x01)),
		"0 byte in a label": testRequest(testSeries([]string{"__name__", "a\x00b"}, testSample{f(1), 1000})),
	}
	for name, body := range cases {
		if enc, ok := Encode(body); ok {
			t.Errorf("%s: encoded as %x", name, enc)
		}
	}
}

// TestDecodeMalformed: damage anywhere in an encoded request is an
// ErrMalformed error, never a panic nor a wrong request.
func TestDecodeMalformed(t *testing.T) {
	enc, ok := Encode(scrape())
	if !ok {
		t.Fatal("Encode declined")
	}
	for cut := range len(enc) {
		if _, err := Decode(enc[:cut]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0xff
		if _, err := Decode(bad); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
}

// TestDecodeBoundsOutput: a forged record whose one long string is
// referenced by many labels is refused once it would decode to over
// MaxDecoded, not decoded into memory.
func TestDecodeBoundsOutput(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 1<<20)
	const labels = 200 // 200 MiB of label values from ~1 MiB
	cols := [numColumns][]byte{
		colStrBytes:     append(long, 0),
		colLabelCounts:  protowire.AppendVarint(nil, labels),
		colLabelNames:   make([]byte, labels), // all label names string 0…
		colLabelValues:  make([]byte, labels), // …and its values too
		colSampleCounts: {0},
	}
	enc := protowire.AppendVarint(nil, 1)
	enc = protowire.AppendVarint(enc, 1)
	for _, c := range cols {
		enc = protowire.AppendBytes(enc, c)
	}
	if _, err := Decode(enc); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Decode = %v, want ErrMalformed", err)
	}
}

// TestCodecRealRequests: requests captured from Prometheus 2.42
// remote-writing its own metrics (the fuzz seed corpus) are all encoded,
// round-trip, and shrink.
func TestCodecRealRequests(t *testing.T) {
	bodies := realRequests(t)
	var raw, enc int
	for _, body := range bodies {
		e, ok := Encode(body)
		if !ok {
			t.Fatalf("a real request of %d bytes was declined", len(body))
		}
		raw, enc = raw+len(body), enc+len(e)
	}
	t.Logf("%d requests: protobuf %d bytes, encoded %d (%.2fx)", len(bodies), raw, enc, float64(raw)/float64(enc))
}

// realRequests reads the captured requests of the round-trip fuzz
// corpus (testdata/fuzz/FuzzRemoteWriteCodecRoundTrip/real-*).
func realRequests(t testing.TB) [][]byte {
	files, err := filepath.Glob("testdata/fuzz/FuzzRemoteWriteCodecRoundTrip/real-*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured requests: %v", err)
	}
	var out [][]byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		body, err := corpusBytes(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, body)
	}
	return out
}

// FuzzRemoteWriteCodecRoundTrip: whatever Encode accepts, Decode gives
// back byte for byte; and Decode of any bytes is an answer or
// ErrMalformed, never a panic.
func FuzzRemoteWriteCodecRoundTrip(f *testing.F) {
	f.Add(scrape())
	f.Add(testRequest(testSeries([]string{"a", "b"}, testSample{staleNaN, 1})))
	f.Fuzz(func(t *testing.T, body []byte) {
		if enc, ok := Encode(body); ok {
			dec, err := Decode(enc)
			if err != nil || !bytes.Equal(dec, body) {
				t.Fatalf("Decode(Encode(%x)) = %x, %v", body, dec, err)
			}
		}
		if _, err := Decode(body); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Decode: %v is not ErrMalformed", err)
		}
	})
}

// corpusBytes is the []byte of a one-value fuzz corpus file
// ("go test fuzz v1", then []byte("…")).
func corpusBytes(file []byte) ([]byte, error) {
	_, lit, ok := bytes.Cut(file, []byte("\n[]byte("))
	if !ok {
		return nil, errors.New("not a []byte corpus file")
	}
	s, err := strconv.Unquote(string(bytes.TrimSuffix(bytes.TrimSpace(lit), []byte(")"))))
	return []byte(s), err
}

// samplesIn counts the samples of a WriteRequest the codec carries.
func samplesIn(tb testing.TB, body []byte) int {
	var e encoder
	if !e.parseRequest(body) {
		tb.Fatal("not a request the codec carries")
	}
	return len(e.cols[colTags])
}

// BenchmarkEncode is the agent's cost per remote-write request: encode,
// decode and compare (the lossless check), on Prometheus' own requests.
func BenchmarkEncode(b *testing.B) {
	bodies := realRequests(b)
	samples := 0
	for _, body := range bodies {
		samples += samplesIn(b, body)
	}
	b.ResetTimer()
	for range b.N {
		for _, body := range bodies {
			if _, ok := Encode(body); !ok {
				b.Fatal("declined")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}

// BenchmarkDecode is the exporter's and consume's cost per request.
func BenchmarkDecode(b *testing.B) {
	bodies := realRequests(b)
	var encs [][]byte
	samples := 0
	for _, body := range bodies {
		e, _ := Encode(body)
		encs, samples = append(encs, e), samples+samplesIn(b, body)
	}
	b.ResetTimer()
	for range b.N {
		for _, e := range encs {
			if _, err := Decode(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}
