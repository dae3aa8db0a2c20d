package rsocketxfer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The RSocket adapter's own binary encoding (docs/xfer.md, "RSocket
// mapping"), so that protobuf stays in the gRPC adapter: a message is a
// version byte, a kind byte, then fixed-width big-endian fields; a name
// or a SHA-256 of variable length comes last or after its length byte.
// The chunks, the hot path, carry no message at all: their metadata is
// 'c' and the CRC32C, their data the file's bytes.
//
// WireVersion is 1 because the encoding before it was protobuf: a
// protobuf message cannot start with byte 1 (field number 0 is invalid),
// so a server of the protobuf era refuses ours with "bad begin" or "bad
// offset request", which the client recognises (olderServer), and ours
// names the first byte of a protobuf message, 0x0a for a name, as a
// version it does not speak.
const WireVersion = 1

// Message kinds, the second byte of a message.
const (
	kindBegin         = 'B'
	kindOffsetRequest = 'O'
	kindOffsetAnswer  = 'o'
	kindAck           = 'a'
	kindDone          = 'd'
)

// Payload metadata: the route of an upload's REQUEST_CHANNEL and of an
// offset's REQUEST_RESPONSE, then what each payload of the channel is.
const (
	MetaUpload = "upload"
	MetaOffset = "offset"
	metaChunk  = 'c'
	metaFinish = 'f'
)

const (
	headerLen    = 2
	sha256Len    = 32
	beginMinLen  = headerLen + 8 + 8 + 1 // version, kind, size, offset, SHA-256 length
	offsetAnsLen = headerLen + 1 + 8 + 8 // version, kind, exists, offset, size
	ackLen       = headerLen + 8
	doneLen      = headerLen + 8 + sha256Len
	chunkMetaLen = 1 + 4
)

// versionPrefix starts the message of a refusal for a version mismatch,
// so that the client can tell it from others and not retry.
const versionPrefix = "xfer wire version "

// VersionError is a message of a wire version this side does not speak.
type VersionError struct{ Got byte }

func (e *VersionError) Error() string {
	s := fmt.Sprintf("%s%d from the peer, this side speaks %d: run the same sluice release on both ends", versionPrefix, e.Got, WireVersion)
	if e.Got == 0x0a {
		s += " (0x0a starts an xfer.v1 protobuf message: the peer predates the binary encoding)"
	}
	return s
}

// errShort is the decoders' refusal of a message shorter than its kind's
// fields.
var errShort = errors.New("xfer message truncated")

// Begin opens an upload: the file's name and size, the offset the client
// goes on from and, optionally, the file's SHA-256 known in advance.
type Begin struct {
	Name         string
	Size, Offset int64
	SHA256       []byte // empty, or 32 bytes
}

// AppendBegin appends b's encoding to dst: header | size | offset |
// SHA-256 length (0 or 32) | SHA-256 | name.
func AppendBegin(dst []byte, b Begin) []byte {
	dst = append(dst, WireVersion, kindBegin)
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.Size))
	dst = binary.BigEndian.AppendUint64(dst, uint64(b.Offset))
	dst = append(dst, byte(len(b.SHA256)))
	dst = append(dst, b.SHA256...)
	return append(dst, b.Name...)
}

// DecodeBegin decodes a Begin; its SHA256 aliases p.
func DecodeBegin(p []byte) (Begin, error) {
	if err := checkHeader(p, kindBegin, beginMinLen); err != nil {
		return Begin{}, err
	}
	b := Begin{
		Size:   int64(binary.BigEndian.Uint64(p[2:])),
		Offset: int64(binary.BigEndian.Uint64(p[10:])),
	}
	n := int(p[18])
	if n != 0 && n != sha256Len {
		return Begin{}, fmt.Errorf("begin with a SHA-256 of %d bytes", n)
	}
	rest := p[beginMinLen:]
	if len(rest) < n {
		return Begin{}, errShort
	}
	if n > 0 {
		b.SHA256 = rest[:n]
	}
	b.Name = string(rest[n:])
	return b, nil
}

// AppendOffsetRequest appends the encoding of a request for name's
// offset: header | name.
func AppendOffsetRequest(dst []byte, name string) []byte {
	return append(append(dst, WireVersion, kindOffsetRequest), name...)
}

// DecodeOffsetRequest decodes a request for a name's offset.
func DecodeOffsetRequest(p []byte) (string, error) {
	if err := checkHeader(p, kindOffsetRequest, headerLen); err != nil {
		return "", err
	}
	return string(p[headerLen:]), nil
}

// OffsetAnswer is the server's durable offset and size of an upload;
// Exists is false when it has none of that name.
type OffsetAnswer struct {
	Offset, Size int64
	Exists       bool
}

// AppendOffsetAnswer appends a's encoding: header | exists (0 or 1) |
// offset | size.
func AppendOffsetAnswer(dst []byte, a OffsetAnswer) []byte {
	var exists byte
	if a.Exists {
		exists = 1
	}
	dst = append(dst, WireVersion, kindOffsetAnswer, exists)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Offset))
	return binary.BigEndian.AppendUint64(dst, uint64(a.Size))
}

// DecodeOffsetAnswer decodes an OffsetAnswer.
func DecodeOffsetAnswer(p []byte) (OffsetAnswer, error) {
	if err := checkHeader(p, kindOffsetAnswer, offsetAnsLen); err != nil {
		return OffsetAnswer{}, err
	}
	if len(p) != offsetAnsLen || p[2] > 1 {
		return OffsetAnswer{}, errors.New("malformed offset answer")
	}
	return OffsetAnswer{
		Exists: p[2] == 1,
		Offset: int64(binary.BigEndian.Uint64(p[3:])),
		Size:   int64(binary.BigEndian.Uint64(p[11:])),
	}, nil
}

// UploadAnswer is what the server sends on an upload's channel: an ack
// of the durable offset at each checkpoint, then, once the file is in
// place, its size and SHA-256 (Done).
type UploadAnswer struct {
	Offset int64
	Done   bool
	SHA256 []byte // when Done; aliases the decoded payload
}

// AppendUploadAnswer appends a's encoding: header | offset for an ack,
// header | size | SHA-256 when done.
func AppendUploadAnswer(dst []byte, a UploadAnswer) []byte {
	kind := byte(kindAck)
	if a.Done {
		kind = kindDone
	}
	dst = append(dst, WireVersion, kind)
	dst = binary.BigEndian.AppendUint64(dst, uint64(a.Offset))
	if a.Done {
		dst = append(dst, a.SHA256...)
	}
	return dst
}

// DecodeUploadAnswer decodes an UploadAnswer without allocating: acks
// come at every checkpoint of an upload.
func DecodeUploadAnswer(p []byte) (UploadAnswer, error) {
	if err := checkVersion(p); err != nil {
		return UploadAnswer{}, err
	}
	switch {
	case p[1] == kindAck && len(p) == ackLen:
		return UploadAnswer{Offset: int64(binary.BigEndian.Uint64(p[2:]))}, nil
	case p[1] == kindDone && len(p) == doneLen:
		return UploadAnswer{Offset: int64(binary.BigEndian.Uint64(p[2:])), Done: true, SHA256: p[10:]}, nil
	}
	return UploadAnswer{}, errors.New("malformed upload answer")
}

// putChunkMeta writes a chunk's metadata into meta: 'c' | CRC32C.
func putChunkMeta(meta *[chunkMetaLen]byte, crc uint32) {
	meta[0] = metaChunk
	binary.BigEndian.PutUint32(meta[1:], crc)
}

// AppendChunkMeta appends a chunk's metadata ('c' | CRC32C) to dst.
func AppendChunkMeta(dst []byte, crc uint32) []byte {
	var m [chunkMetaLen]byte
	putChunkMeta(&m, crc)
	return append(dst, m[:]...)
}

// decodeChunkMeta is the CRC32C of a chunk's metadata, without
// allocating: it is read once per chunk.
func decodeChunkMeta(meta []byte) (uint32, error) {
	if len(meta) != chunkMetaLen || meta[0] != metaChunk {
		return 0, fmt.Errorf("chunk metadata of %d bytes, want %d", len(meta), chunkMetaLen)
	}
	return binary.BigEndian.Uint32(meta[1:]), nil
}

// checkHeader checks p's version and kind, and that it has at least min
// bytes.
func checkHeader(p []byte, kind byte, min int) error {
	if err := checkVersion(p); err != nil {
		return err
	}
	if p[1] != kind {
		return fmt.Errorf("xfer message of kind %q, want %q", p[1], kind)
	}
	if len(p) < min {
		return errShort
	}
	return nil
}

func checkVersion(p []byte) error {
	if len(p) == 0 {
		return errors.New("empty xfer message")
	}
	if p[0] != WireVersion {
		return &VersionError{Got: p[0]}
	}
	if len(p) < headerLen {
		return errShort
	}
	return nil
}

// olderServer tells whether msg is how a server of the protobuf era
// refuses a message of ours (its proto.Unmarshal fails on our version
// byte).
func olderServer(msg string) bool {
	return strings.HasPrefix(msg, "bad begin: proto") || strings.HasPrefix(msg, "bad offset request: proto")
}
