package rsocketxfer

import (
	"bytes"
	"testing"
)

// FuzzWireDecode feeds any bytes to every decoder: none may panic or
// read past the message, and what one decodes encodes back to the same
// bytes (the encoding has one spelling per message).
func FuzzWireDecode(f *testing.F) {
	f.Add(AppendBegin(nil, Begin{Name: "a.bin", Size: 1 << 20, Offset: 4096}))
	f.Add(AppendBegin(nil, Begin{Name: "b", SHA256: bytes.Repeat([]byte{1}, sha256Len)}))
	f.Add(AppendOffsetRequest(nil, "a.bin"))
	f.Add(AppendOffsetAnswer(nil, OffsetAnswer{Offset: 1, Size: 2, Exists: true}))
	f.Add(AppendUploadAnswer(nil, UploadAnswer{Offset: 1 << 20}))
	f.Add(AppendUploadAnswer(nil, UploadAnswer{Offset: 3, Done: true, SHA256: bytes.Repeat([]byte{2}, sha256Len)}))
	f.Add(AppendChunkMeta(nil, 0xdeadbeef))
	f.Add([]byte{0x0a, 1, 'a'}) // a protobuf OffsetRequest
	f.Fuzz(func(t *testing.T, p []byte) {
		reencodes(t, "begin", p, DecodeBegin, AppendBegin)
		reencodes(t, "offset request", p, DecodeOffsetRequest, AppendOffsetRequest)
		reencodes(t, "offset answer", p, DecodeOffsetAnswer, AppendOffsetAnswer)
		reencodes(t, "upload answer", p, DecodeUploadAnswer, AppendUploadAnswer)
		reencodes(t, "chunk metadata", p, decodeChunkMeta, AppendChunkMeta)
	})
}

// reencodes checks that p, when decode takes it, encodes back the same.
func reencodes[T any](t *testing.T, what string, p []byte, decode func([]byte) (T, error), encode func([]byte, T) []byte) {
	t.Helper()
	m, err := decode(p)
	if err != nil {
		return
	}
	if got := encode(nil, m); !bytes.Equal(got, p) {
		t.Errorf("%s %x decoded as %+v, encodes as %x", what, p, m, got)
	}
}
