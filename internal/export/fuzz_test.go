package export

import (
	"testing"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// FuzzDecodeWriteRequest: the remote-write decoder never panics, and
// what it decodes shows without error.
func FuzzDecodeWriteRequest(f *testing.F) {
	f.Add(writeRequest("up", "j", 1, 2))
	f.Add(append(writeRequest("a", "b", 3, 4), writeRequest("c", "d", 5, 6)...))
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var n int
		err := decodeWriteRequest(b, func(s *series) error { n += len(s.samples); return nil })
		if _, serr := Show(nil, marked(telemetry.RemoteWrite, b)); (err == nil) != (serr == nil) {
			t.Fatalf("decode: %v, show: %v", err, serr)
		}
	})
}

// FuzzShow: any record, marked or not, of any kind, shows or fails
// without panicking.
func FuzzShow(f *testing.F) {
	f.Add([]byte("plain"))
	f.Add(marked(telemetry.RemoteWrite, writeRequest("up", "j", 1, 2)))
	f.Add(marked(telemetry.OTLPMetrics, []byte{0x0a, 0x00}))
	f.Add(marked(telemetry.OTLPTraces, []byte{0x0a, 0x02, 0x0a, 0x00}))
	f.Fuzz(func(t *testing.T, rec []byte) {
		Show(nil, rec)
	})
}

// FuzzPartialSuccess: any answer of an OTLP receiver reads as a partial
// success or an error, never a panic.
func FuzzPartialSuccess(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x05, 0x08, 0x03, 0x12, 0x01, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		partialSuccess(b)
	})
}
