// Package storedmsg is the format of one agent message in the sink's store:
// one seglog record per message, holding the message's provenance and its
// body exactly as the agent sent it.
//
// # Format
//
// Integers are little-endian, as in seglog; there is no padding:
//
//	0   2 bytes  magic "SM"
//	2   uint8    format version (1)
//	3   uint8    codec (codec.Kind, as on the wire): 1 plain, 2 zstd,
//	             3 zstd with a dictionary
//	4   uint32   dictionary id: non-zero for codec 3, zero otherwise
//	8   uint64   message id (the agent's Request.message_id)
//	16  uint32   record count (Request.record_count, checked on receipt)
//	20  uint16   length n of the agent id, 1 <= n <= MaxAgentID
//	22  n bytes  agent id
//	..  body     the batch as received: for plain an internal/batch body,
//	             otherwise one zstd frame that decompresses to one
//
// The body runs to the end of the record. Compressed messages stay
// compressed in the store, so storage costs what the network carried and
// the sink spends no CPU recompressing; a reader decompresses on the way
// out, with the agent's dictionary for codec 3. The record count is in the
// header so that statistics and dedup need not decompress.
//
// Every field has one valid encoding, so a record that decodes re-encodes to
// the same bytes. Decode validates the header only; the body's own format is
// checked by the sink before it stores a message and by readers with
// internal/batch and internal/codec.
package storedmsg

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/codec"
)

const (
	// Version is the format version, the third byte of every record.
	Version = 1
	// HeaderSize is the size of the fixed part of the header, before the
	// agent id.
	HeaderSize = 22
	// MaxAgentID is the longest agent id in bytes (Hello.agent_id is
	// limited to the same).
	MaxAgentID = 255
)

// Magic is the first two bytes of every record.
const Magic = "SM"

// ErrMalformed is wrapped by every error Decode and Append return about a
// message that does not follow the format. errors.As with a *FormatError
// gives the details.
var ErrMalformed = errors.New("storedmsg: malformed message")

// FormatError says where and how a stored message is malformed. It wraps
// ErrMalformed.
type FormatError struct {
	// Offset is the byte offset of the bad field (for Append errors, the
	// offset the field would have).
	Offset int
	// Reason says what is wrong.
	Reason string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("storedmsg: malformed message at byte %d: %s", e.Offset, e.Reason)
}

// Unwrap returns ErrMalformed.
func (e *FormatError) Unwrap() error { return ErrMalformed }

func malformed(offset int, format string, args ...any) error {
	return &FormatError{Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

// Message is one stored message. Decode fills AgentID and Body with slices
// of its input (no copy): they are valid as long as that buffer is.
type Message struct {
	Codec       codec.Kind
	DictID      uint32 // non-zero exactly when Codec is codec.ZstdDict
	MessageID   uint64
	RecordCount uint32
	AgentID     []byte // 1..MaxAgentID bytes
	Body        []byte
}

// Size returns the encoded size of m.
func (m *Message) Size() int { return HeaderSize + len(m.AgentID) + len(m.Body) }

// Append appends the encoding of m to dst and returns the extended slice.
// With a dst that has room it does not allocate. It checks m as Decode
// would and, if m is invalid, returns dst unchanged and an error wrapping
// ErrMalformed.
func Append(dst []byte, m *Message) ([]byte, error) {
	if err := checkFields(m.Codec, m.DictID, len(m.AgentID)); err != nil {
		return dst, err
	}
	dst = append(dst, Magic[0], Magic[1], Version, byte(m.Codec))
	dst = binary.LittleEndian.AppendUint32(dst, m.DictID)
	dst = binary.LittleEndian.AppendUint64(dst, m.MessageID)
	dst = binary.LittleEndian.AppendUint32(dst, m.RecordCount)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(m.AgentID)))
	dst = append(dst, m.AgentID...)
	return append(dst, m.Body...), nil
}

// checkFields validates what Append and Decode both check.
func checkFields(c codec.Kind, dictID uint32, agentLen int) error {
	switch {
	case c != codec.Plain && c != codec.Zstd && c != codec.ZstdDict:
		return malformed(3, "unknown codec %d", uint8(c))
	case c == codec.ZstdDict && dictID == 0:
		return malformed(4, "codec zstd_dict with dictionary id 0")
	case c != codec.ZstdDict && dictID != 0:
		return malformed(4, "dictionary id %d with codec %v", dictID, c)
	case agentLen == 0:
		return malformed(20, "empty agent id")
	case agentLen > MaxAgentID:
		return malformed(20, "agent id of %d bytes, limit %d", agentLen, MaxAgentID)
	}
	return nil
}

// Decode parses a stored message without copying: m.AgentID and m.Body
// alias src. Errors wrap ErrMalformed and are *FormatError; Decode never
// panics, whatever src holds.
func Decode(src []byte) (Message, error) {
	switch {
	case len(src) < HeaderSize:
		return Message{}, malformed(len(src), "%d bytes, shorter than the %d-byte header", len(src), HeaderSize)
	case src[0] != Magic[0] || src[1] != Magic[1]:
		return Message{}, malformed(0, "bad magic %q, want %q", src[:2], Magic)
	case src[2] != Version:
		return Message{}, malformed(2, "unsupported version %d, want %d", src[2], Version)
	}
	m := Message{
		Codec:       codec.Kind(src[3]),
		DictID:      binary.LittleEndian.Uint32(src[4:8]),
		MessageID:   binary.LittleEndian.Uint64(src[8:16]),
		RecordCount: binary.LittleEndian.Uint32(src[16:20]),
	}
	n := int(binary.LittleEndian.Uint16(src[20:22]))
	if err := checkFields(m.Codec, m.DictID, n); err != nil {
		return Message{}, err
	}
	if len(src)-HeaderSize < n {
		return Message{}, malformed(HeaderSize, "agent id of %d bytes, only %d left", n, len(src)-HeaderSize)
	}
	end := HeaderSize + n
	m.AgentID = src[HeaderSize:end:end]
	m.Body = src[end:len(src):len(src)]
	return m, nil
}
