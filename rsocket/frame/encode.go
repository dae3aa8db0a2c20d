package frame

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Every Append function appends one frame (without a length prefix) to dst
// and returns the extended slice. It grows dst at most once, by the exact
// frame size, so it does not allocate when dst has the capacity. On error it
// returns dst unchanged and an error wrapping one of the Err* sentinels;
// errors are only possible for inputs a conforming sender must not produce
// (a frame over MaxFrameSize, a stream id over 2^31-1, a request N of 0...),
// so a caller that sizes its fragments with MaxFragmentPayload only sees
// them on a bug.
//
// The M flag is derived from the metadata argument: nil means no metadata,
// non-nil (even empty) sets M and writes it. Other flag bits passed in are
// written as given (masked to 10 bits), so tests can produce frames with
// flags this package does not interpret.

func appendHeader(b []byte, stream uint32, t Type, flags Flags) []byte {
	b = binary.BigEndian.AppendUint32(b, stream)
	return binary.BigEndian.AppendUint16(b, uint16(t)<<10|uint16(flags&flagMask))
}

func appendUint24(b []byte, n int) []byte {
	return append(b, byte(n>>16), byte(n>>8), byte(n))
}

// appendBody appends the optional metadata (with its length) and the data.
func appendBody(b []byte, metadata, data []byte) []byte {
	if metadata != nil {
		b = appendUint24(b, len(metadata))
		b = append(b, metadata...)
	}
	return append(b, data...)
}

func withMetadata(flags Flags, metadata []byte) Flags {
	flags &^= FlagMetadata
	if metadata != nil {
		flags |= FlagMetadata
	}
	return flags
}

func bodySize(metadata, data []byte) int {
	n := len(data)
	if metadata != nil {
		n += MetadataLengthSize + len(metadata)
	}
	return n
}

func checkSize(t Type, n int) error {
	if n > MaxFrameSize {
		return fmt.Errorf("rsocket: %v frame of %d bytes: %w (max %d, fragment it)", t, n, ErrFrameTooLarge, MaxFrameSize)
	}
	return nil
}

// checkStream checks a stream id for a frame that belongs to a stream.
func checkStream(t Type, stream uint32) error {
	if stream == 0 || stream > MaxStreamID {
		return fmt.Errorf("rsocket: %v on stream %d: %w (must be 1..2^31-1)", t, stream, ErrStreamID)
	}
	return nil
}

func checkN(t Type, n uint32) error {
	if n == 0 || n > max31 {
		return fmt.Errorf("rsocket: %v with N=%d: %w", t, n, ErrInvalidN)
	}
	return nil
}

func check31(t Type, what string, v uint32, allowZero bool) error {
	if v > max31 || (v == 0 && !allowZero) {
		return fmt.Errorf("rsocket: %v %s %d: %w", t, what, v, ErrInvalidField)
	}
	return nil
}

func checkPosition(t Type, pos uint64) error {
	if pos > MaxPosition {
		return fmt.Errorf("rsocket: %v position %d: %w (max 2^63-1)", t, pos, ErrInvalidField)
	}
	return nil
}

// AppendSetup appends a SETUP frame. s.StreamID and s.Type are not used
// (SETUP is always on stream 0). The R flag is set iff s.ResumeToken is
// non-nil, M iff s.Metadata is non-nil; the L and I flags are taken from
// s.Flags. Versions are written as given: use ProtocolMajor, ProtocolMinor.
func AppendSetup(dst []byte, s Setup) ([]byte, error) {
	const t = TypeSetup
	if err := check31(t, "keepalive interval", s.KeepaliveInterval, false); err != nil {
		return dst, err
	}
	if err := check31(t, "max lifetime", s.MaxLifetime, false); err != nil {
		return dst, err
	}
	if len(s.MetadataMIME) > MaxMIMELength || len(s.DataMIME) > MaxMIMELength {
		return dst, fmt.Errorf("rsocket: SETUP MIME type of %d/%d bytes: %w (max %d)",
			len(s.MetadataMIME), len(s.DataMIME), ErrTooLong, MaxMIMELength)
	}
	flags := withMetadata(s.Flags, s.Metadata) &^ FlagResume
	n := FixedSize(t) + len(s.MetadataMIME) + len(s.DataMIME) + bodySize(s.Metadata, s.Data)
	if s.ResumeToken != nil {
		if len(s.ResumeToken) > MaxResumeTokenLength {
			return dst, fmt.Errorf("rsocket: SETUP resume token of %d bytes: %w (max %d)", len(s.ResumeToken), ErrTooLong, MaxResumeTokenLength)
		}
		flags |= FlagResume
		n += 2 + len(s.ResumeToken)
	}
	if err := checkSize(t, n); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, n)
	b = appendHeader(b, 0, t, flags)
	b = binary.BigEndian.AppendUint16(b, s.MajorVersion)
	b = binary.BigEndian.AppendUint16(b, s.MinorVersion)
	b = binary.BigEndian.AppendUint32(b, s.KeepaliveInterval)
	b = binary.BigEndian.AppendUint32(b, s.MaxLifetime)
	if s.ResumeToken != nil {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s.ResumeToken)))
		b = append(b, s.ResumeToken...)
	}
	b = append(b, byte(len(s.MetadataMIME)))
	b = append(b, s.MetadataMIME...)
	b = append(b, byte(len(s.DataMIME)))
	b = append(b, s.DataMIME...)
	return appendBody(b, s.Metadata, s.Data), nil
}

// AppendLease appends a LEASE frame on stream 0. ttl (ms) and count may be 0
// (stop all requests) but must be < 2^31. Metadata, if non-nil, is written
// without a length field.
func AppendLease(dst []byte, ttl, count uint32, metadata []byte) ([]byte, error) {
	const t = TypeLease
	if err := check31(t, "TTL", ttl, true); err != nil {
		return dst, err
	}
	if err := check31(t, "number of requests", count, true); err != nil {
		return dst, err
	}
	n := FixedSize(t) + len(metadata)
	if err := checkSize(t, n); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, n)
	b = appendHeader(b, 0, t, withMetadata(0, metadata))
	b = binary.BigEndian.AppendUint32(b, ttl)
	b = binary.BigEndian.AppendUint32(b, count)
	return append(b, metadata...), nil
}

// AppendKeepalive appends a KEEPALIVE frame on stream 0. respond sets the R
// flag; lastReceived is the resume position (0 without resume).
func AppendKeepalive(dst []byte, respond bool, lastReceived uint64, data []byte) ([]byte, error) {
	const t = TypeKeepalive
	if err := checkPosition(t, lastReceived); err != nil {
		return dst, err
	}
	n := FixedSize(t) + len(data)
	if err := checkSize(t, n); err != nil {
		return dst, err
	}
	var flags Flags
	if respond {
		flags = FlagRespond
	}
	b := slices.Grow(dst, n)
	b = appendHeader(b, 0, t, flags)
	b = binary.BigEndian.AppendUint64(b, lastReceived)
	return append(b, data...), nil
}

// appendStreamFrame writes the frames whose body is [u32 N] metadata data.
func appendStreamFrame(dst []byte, t Type, stream uint32, flags Flags, withN bool, n uint32, metadata, data []byte) ([]byte, error) {
	if err := checkStream(t, stream); err != nil {
		return dst, err
	}
	size := HeaderSize + bodySize(metadata, data)
	if withN {
		if err := checkN(t, n); err != nil {
			return dst, err
		}
		size += 4
	}
	if err := checkSize(t, size); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, size)
	b = appendHeader(b, stream, t, withMetadata(flags, metadata))
	if withN {
		b = binary.BigEndian.AppendUint32(b, n)
	}
	return appendBody(b, metadata, data), nil
}

// AppendRequestResponse appends a REQUEST_RESPONSE frame. flags may carry F
// (more fragments follow) and I.
func AppendRequestResponse(dst []byte, stream uint32, flags Flags, metadata, data []byte) ([]byte, error) {
	return appendStreamFrame(dst, TypeRequestResponse, stream, flags, false, 0, metadata, data)
}

// AppendRequestFNF appends a REQUEST_FNF frame. flags may carry F and I.
func AppendRequestFNF(dst []byte, stream uint32, flags Flags, metadata, data []byte) ([]byte, error) {
	return appendStreamFrame(dst, TypeRequestFNF, stream, flags, false, 0, metadata, data)
}

// AppendRequestStream appends a REQUEST_STREAM frame with initial request n
// (1..2^31-1). flags may carry F and I.
func AppendRequestStream(dst []byte, stream uint32, flags Flags, n uint32, metadata, data []byte) ([]byte, error) {
	return appendStreamFrame(dst, TypeRequestStream, stream, flags, true, n, metadata, data)
}

// AppendRequestChannel appends a REQUEST_CHANNEL frame with initial request
// n (1..2^31-1). flags may carry F, C and I.
func AppendRequestChannel(dst []byte, stream uint32, flags Flags, n uint32, metadata, data []byte) ([]byte, error) {
	return appendStreamFrame(dst, TypeRequestChannel, stream, flags, true, n, metadata, data)
}

// AppendRequestN appends a REQUEST_N frame granting n (1..2^31-1) more items.
func AppendRequestN(dst []byte, stream uint32, n uint32) ([]byte, error) {
	return appendStreamFrame(dst, TypeRequestN, stream, 0, true, n, nil, nil)
}

// AppendCancel appends a CANCEL frame.
func AppendCancel(dst []byte, stream uint32) ([]byte, error) {
	return appendStreamFrame(dst, TypeCancel, stream, 0, false, 0, nil, nil)
}

// AppendPayload appends a PAYLOAD frame. flags carries N, C, F (and I); at
// least one of N, C and F must be set, as ParsePayload requires.
func AppendPayload(dst []byte, stream uint32, flags Flags, metadata, data []byte) ([]byte, error) {
	if flags&(FlagNext|FlagComplete|FlagFollows) == 0 {
		return dst, fmt.Errorf("rsocket: PAYLOAD with none of N, C, F: %w", ErrInvalidFlags)
	}
	return appendStreamFrame(dst, TypePayload, stream, flags, false, 0, metadata, data)
}

// AppendPayloadHead appends a PAYLOAD frame's bytes up to its data: a
// length prefix for the whole frame (header, metadata and dataLen bytes of
// data), then the header and the metadata. The caller writes the data right
// after them, so that a large payload reaches the transport without being
// copied into a frame buffer first (one writev of head and data). The
// bytes on the wire are those of ReserveLengthPrefix, AppendPayload and
// SetLengthPrefix with the same arguments.
func AppendPayloadHead(dst []byte, stream uint32, flags Flags, metadata []byte, dataLen int) ([]byte, error) {
	const t = TypePayload
	if flags&(FlagNext|FlagComplete|FlagFollows) == 0 {
		return dst, fmt.Errorf("rsocket: PAYLOAD with none of N, C, F: %w", ErrInvalidFlags)
	}
	if err := checkStream(t, stream); err != nil {
		return dst, err
	}
	if dataLen < 0 {
		return dst, fmt.Errorf("rsocket: PAYLOAD with %d bytes of data: %w", dataLen, ErrFrameTooLarge)
	}
	size := HeaderSize + bodySize(metadata, nil) + dataLen
	if err := checkSize(t, size); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, LengthPrefixSize+size-dataLen)
	b = appendUint24(b, size)
	b = appendHeader(b, stream, t, withMetadata(flags, metadata))
	return appendBody(b, metadata, nil), nil
}

// AppendError appends an ERROR frame with a UTF-8 message. Stream 0 is for
// connection errors (see ErrorCode.IsConnectionScoped).
func AppendError(dst []byte, stream uint32, code ErrorCode, message string) ([]byte, error) {
	const t = TypeError
	if stream > MaxStreamID {
		return dst, fmt.Errorf("rsocket: ERROR on stream %d: %w", stream, ErrStreamID)
	}
	n := FixedSize(t) + len(message)
	if err := checkSize(t, n); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, n)
	b = appendHeader(b, stream, t, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	return append(b, message...), nil
}

// AppendMetadataPush appends a METADATA_PUSH frame on stream 0. The M flag
// is always set and the metadata has no length field.
func AppendMetadataPush(dst []byte, metadata []byte) ([]byte, error) {
	const t = TypeMetadataPush
	n := HeaderSize + len(metadata)
	if err := checkSize(t, n); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, n)
	b = appendHeader(b, 0, t, FlagMetadata)
	return append(b, metadata...), nil
}

// AppendResume appends a RESUME frame on stream 0.
func AppendResume(dst []byte, major, minor uint16, token []byte, lastReceivedServer, firstAvailableClient uint64) ([]byte, error) {
	const t = TypeResume
	if len(token) > MaxResumeTokenLength {
		return dst, fmt.Errorf("rsocket: RESUME token of %d bytes: %w (max %d)", len(token), ErrTooLong, MaxResumeTokenLength)
	}
	if err := checkPosition(t, lastReceivedServer); err != nil {
		return dst, err
	}
	if err := checkPosition(t, firstAvailableClient); err != nil {
		return dst, err
	}
	n := FixedSize(t) + len(token)
	b := slices.Grow(dst, n)
	b = appendHeader(b, 0, t, 0)
	b = binary.BigEndian.AppendUint16(b, major)
	b = binary.BigEndian.AppendUint16(b, minor)
	b = binary.BigEndian.AppendUint16(b, uint16(len(token)))
	b = append(b, token...)
	b = binary.BigEndian.AppendUint64(b, lastReceivedServer)
	return binary.BigEndian.AppendUint64(b, firstAvailableClient), nil
}

// AppendResumeOK appends a RESUME_OK frame on stream 0.
func AppendResumeOK(dst []byte, lastReceivedClient uint64) ([]byte, error) {
	const t = TypeResumeOK
	if err := checkPosition(t, lastReceivedClient); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, FixedSize(t))
	b = appendHeader(b, 0, t, 0)
	return binary.BigEndian.AppendUint64(b, lastReceivedClient), nil
}

// AppendExt appends an EXT frame with extended type extType (1..2^31-1), on
// any stream (0 included). flags may carry I (set it unless the peer must
// understand the extension).
func AppendExt(dst []byte, stream uint32, flags Flags, extType uint32, metadata, data []byte) ([]byte, error) {
	const t = TypeExt
	if stream > MaxStreamID {
		return dst, fmt.Errorf("rsocket: EXT on stream %d: %w", stream, ErrStreamID)
	}
	if err := check31(t, "extended type", extType, false); err != nil {
		return dst, err
	}
	n := FixedSize(t) + bodySize(metadata, data)
	if err := checkSize(t, n); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, n)
	b = appendHeader(b, stream, t, withMetadata(flags, metadata))
	b = binary.BigEndian.AppendUint32(b, extType)
	return appendBody(b, metadata, data), nil
}
