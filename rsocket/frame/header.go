package frame

import "encoding/binary"

// Sizes and limits of the wire format.
const (
	// HeaderSize is the frame header: 31-bit stream id, 6-bit type, 10 flags.
	HeaderSize = 6
	// LengthPrefixSize is the 24-bit frame length that precedes each frame
	// on byte-stream transports (TCP); not part of the frame.
	LengthPrefixSize = 3
	// MetadataLengthSize is the 24-bit metadata length that precedes the
	// metadata of frames that carry both metadata and data.
	MetadataLengthSize = 3
	// MaxFrameSize is the largest frame on any transport (Protocol.md "Max
	// Frame Size"); larger payloads must be fragmented.
	MaxFrameSize = 1<<24 - 1
	// MaxStreamID is the largest stream id (31 bits).
	MaxStreamID = 1<<31 - 1
	// MaxRequestN is the largest request N; it is a number of items, not
	// "unbounded" (Protocol.md "Reactive Streams Semantics").
	MaxRequestN = 1<<31 - 1
	// MaxPosition is the largest resume position (63 bits).
	MaxPosition = 1<<63 - 1
	// MaxMIMELength is the longest SETUP MIME type (8-bit length).
	MaxMIMELength = 255
	// MaxResumeTokenLength is the longest resume token (16-bit length).
	MaxResumeTokenLength = 65535
	// ProtocolMajor and ProtocolMinor are the version this package speaks.
	ProtocolMajor = 1
	ProtocolMinor = 0

	max31 = 1<<31 - 1
)

// Header is the part common to every frame. Parsing a header never fails on
// a known or unknown type: only a frame shorter than HeaderSize (or longer
// than MaxFrameSize) is rejected.
type Header struct {
	StreamID uint32 // 31 bits; the reserved top bit is dropped on parse
	Type     Type
	Flags    Flags // all 10 bits as received, including bits unknown to the type
}

// Has reports whether all bits of f are set in the header's flags.
func (h Header) Has(f Flags) bool { return h.Flags&f == f }

// HasMetadata reports whether the M flag is set.
func (h Header) HasMetadata() bool { return h.Flags&FlagMetadata != 0 }

// CanIgnore reports whether the I flag is set.
func (h Header) CanIgnore() bool { return h.Flags&FlagIgnore != 0 }

// Resumable reports IsResumable(h.Type, h.StreamID).
func (h Header) Resumable() bool { return IsResumable(h.Type, h.StreamID) }

// ParseHeader reads the header of the frame b (without a length prefix). It
// does not look at the body; use the Parse function of h.Type, or Validate,
// for that.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &DecodeError{Kind: KindConnection, Code: ErrorCodeConnectionError,
			Err: ErrTruncated, Detail: itoa(len(b)) + " bytes, the header needs 6", noHeader: true}
	}
	h := readHeader(b)
	if len(b) > MaxFrameSize {
		// Not subject to the I flag: a frame this size cannot have come
		// from a conforming sender on any transport.
		return h, &DecodeError{Kind: KindConnection, Code: ErrorCodeConnectionError, Type: h.Type,
			StreamID: h.StreamID, Flags: h.Flags, Err: ErrFrameTooLarge, Detail: itoa(len(b)) + " bytes"}
	}
	return h, nil
}

func readHeader(b []byte) Header {
	tf := binary.BigEndian.Uint16(b[4:6])
	return Header{
		StreamID: binary.BigEndian.Uint32(b[0:4]) & max31,
		Type:     Type(tf >> 10),
		Flags:    Flags(tf) & flagMask,
	}
}

// FixedSize returns the bytes a frame of type t takes before its metadata
// length, metadata or data: the header plus the type's fixed fields. For
// SETUP and RESUME it is the size with an empty resume token and empty MIME
// types (their real size grows with those); for unknown types it is
// HeaderSize.
func FixedSize(t Type) int {
	switch t {
	case TypeSetup:
		return HeaderSize + 2 + 2 + 4 + 4 + 1 + 1
	case TypeLease, TypeKeepalive, TypeResumeOK:
		return HeaderSize + 8
	case TypeRequestStream, TypeRequestChannel, TypeRequestN, TypeError, TypeExt:
		return HeaderSize + 4
	case TypeResume:
		return HeaderSize + 2 + 2 + 2 + 8 + 8
	}
	return HeaderSize
}

// MaxFragmentPayload returns how many bytes of metadata plus data fit in one
// frame of type t that must not exceed maxFrame bytes (MaxFrameSize if
// maxFrame <= 0 or larger than MaxFrameSize). hasMetadata says whether the
// frame carries the M flag, which costs a 3-byte metadata length for every
// type except LEASE and METADATA_PUSH. A fragmenter splits payloads at this
// size: the first fragment uses the request's type, the rest PAYLOAD. The
// result is 0 if not even the fixed part fits.
func MaxFragmentPayload(t Type, hasMetadata bool, maxFrame int) int {
	if maxFrame <= 0 || maxFrame > MaxFrameSize {
		maxFrame = MaxFrameSize
	}
	n := maxFrame - FixedSize(t)
	if hasMetadata && t != TypeLease && t != TypeMetadataPush {
		n -= MetadataLengthSize
	}
	if n < 0 {
		return 0
	}
	return n
}

// Size returns the encoded size of a frame of type t carrying metadata and
// data (metadata nil means no M flag), without a length prefix: what an
// Append function will add and what the frame counts toward a resume
// position. For SETUP and RESUME use the frame's own fields: Size assumes an
// empty token and empty MIME types.
func Size(t Type, metadata, data []byte) int {
	n := FixedSize(t) + len(data)
	if metadata != nil {
		n += len(metadata)
		if t != TypeLease && t != TypeMetadataPush {
			n += MetadataLengthSize
		}
	}
	return n
}
