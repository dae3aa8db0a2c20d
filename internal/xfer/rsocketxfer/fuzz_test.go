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
		if b, err := DecodeBegin(p); err == nil {
			if got := AppendBegin(nil, b); !bytes.Equal(got, p) {
				t.Errorf("begin %x decoded as %+v, encodes as %x", p, b, got)
			}
		}
		if name, err := DecodeOffsetRequest(p); err == nil {
			if got := AppendOffsetRequest(nil, name); !bytes.Equal(got, p) {
				t.Errorf("offset request %x encodes back as %x", p, got)
			}
		}
		if a, err := DecodeOffsetAnswer(p); err == nil {
			if got := AppendOffsetAnswer(nil, a); !bytes.Equal(got, p) {
				t.Errorf("offset answer %x encodes back as %x", p, got)
			}
		}
		if a, err := DecodeUploadAnswer(p); err == nil {
			if got := AppendUploadAnswer(nil, a); !bytes.Equal(got, p) {
				t.Errorf("upload answer %x encodes back as %x", p, got)
			}
		}
		if crc, err := decodeChunkMeta(p); err == nil {
			if got := AppendChunkMeta(nil, crc); !bytes.Equal(got, p) {
				t.Errorf("chunk metadata %x encodes back as %x", p, got)
			}
		}
	})
}
