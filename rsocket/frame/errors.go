package frame

import (
	"errors"
	"strconv"
)

// Sentinel causes. Every error returned by a Parse function is a *DecodeError
// whose Unwrap gives one of these, so callers can test with errors.Is.
// Encoders return them wrapped with context.
var (
	// ErrTruncated: the frame ends before a fixed field or a length-prefixed
	// field (token, MIME type) does.
	ErrTruncated = errors.New("frame truncated")
	// ErrMetadataLength: the 24-bit metadata length is larger than what is
	// left of the frame (Protocol.md "Metadata Optional Header").
	ErrMetadataLength = errors.New("metadata length exceeds the frame")
	// ErrFrameTooLarge: a frame longer than MaxFrameSize, or than the limit a
	// reader was given.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTrailingBytes: bytes after the last field of a frame that has no
	// variable-length part (REQUEST_N, CANCEL, RESUME, RESUME_OK, LEASE
	// without metadata). A sender never produces them, so they mean the
	// framing is off.
	ErrTrailingBytes = errors.New("trailing bytes after the frame's last field")
	// ErrInvalidN: a request N of 0 or with the reserved top bit set (a
	// negative int32 to a Java peer).
	ErrInvalidN = errors.New("request N must be in 1..2^31-1")
	// ErrInvalidField: any other field outside its range (keepalive interval
	// or max lifetime 0 or >= 2^31, a position >= 2^63, an extended type 0).
	ErrInvalidField = errors.New("field out of range")
	// ErrInvalidFlags: a flag combination the spec forbids (PAYLOAD with
	// none of N, C or F).
	ErrInvalidFlags = errors.New("invalid flags")
	// ErrStreamID: the frame is on a stream its type does not allow
	// (SETUP on a stream other than 0, PAYLOAD on stream 0, ...).
	ErrStreamID = errors.New("frame on the wrong stream")
	// ErrUnknownType: a frame type this package does not know.
	ErrUnknownType = errors.New("unknown frame type")
	// ErrWrongType: a Parse function was given a frame of another type.
	ErrWrongType = errors.New("frame is not of the expected type")
	// ErrTooLong: an encoder was given a field longer than its length
	// prefix can express (a MIME type over 255 bytes, a token over 65,535).
	ErrTooLong = errors.New("field too long")
)

// Kind says what the receiver of a bad frame must do: how large the blast
// radius is. The codec decides only what the bytes allow it to decide; the
// connection state machine may still downgrade (for example ignore a second
// SETUP once the connection is established, as the spec requires).
type Kind uint8

const (
	// KindConnection: the frame is malformed or not allowed. Send
	// ERROR[DecodeError.Code] on stream 0 and close the connection
	// (Protocol.md "Metadata Optional Header", "Handling Ignore Flag",
	// "Connection Establishment").
	KindConnection Kind = iota + 1
	// KindStream: the frame is well formed but a field is invalid for the
	// stream it is on (a request N of 0). Fail that stream with
	// ERROR[INVALID] and keep the connection.
	KindStream
	// KindIgnore: the spec says to ignore the frame: an unknown type or a
	// malformed frame with the I flag set, a stream-0-only frame on another
	// stream, a stream frame on stream 0 (Protocol.md "Handling the
	// Unexpected").
	KindIgnore
)

func (k Kind) String() string {
	switch k {
	case KindConnection:
		return "connection error"
	case KindStream:
		return "stream error"
	case KindIgnore:
		return "ignore"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// DecodeError describes a frame that cannot be used as is. It is only
// allocated on the error path.
type DecodeError struct {
	Kind     Kind
	Code     ErrorCode // the ERROR code to answer with (KindConnection, KindStream)
	Type     Type      // the frame's type, TypeReserved if not even the header could be read
	StreamID uint32
	Flags    Flags
	Err      error  // one of the Err* sentinels
	Detail   string // what exactly was wrong, for logs

	noHeader bool // the frame was too short for Type, StreamID and Flags
}

func (e *DecodeError) Error() string {
	var s string
	if e.noHeader {
		s = "rsocket: frame: " + e.Err.Error()
	} else {
		s = "rsocket: " + e.Type.String() + " frame on stream " + strconv.FormatUint(uint64(e.StreamID), 10) + ": " + e.Err.Error()
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s + " (" + e.Kind.String() + ")"
}

func (e *DecodeError) Unwrap() error { return e.Err }

// KindOf returns the Kind of a decode error, or 0 if err is not one.
func KindOf(err error) Kind {
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Kind
	}
	return 0
}

// IsIgnorable reports whether err says the frame must be silently ignored.
func IsIgnorable(err error) bool { return KindOf(err) == KindIgnore }

// fail builds the error for header h. A malformed frame whose I flag is set
// is ignorable: Protocol.md "Metadata Optional Header" says an invalid frame
// is a connection error "unless the frame's IGNORE flag is set", and
// "Handling Ignore Flag" generalizes that to any frame not understood.
func fail(h Header, kind Kind, code ErrorCode, err error, detail string) *DecodeError {
	if kind != KindIgnore && h.Flags&FlagIgnore != 0 {
		kind = KindIgnore
	}
	return &DecodeError{Kind: kind, Code: code, Type: h.Type, StreamID: h.StreamID, Flags: h.Flags, Err: err, Detail: detail}
}

// connCode is the code for a malformed frame of type t: ERROR[INVALID_SETUP]
// for a SETUP (Protocol.md "Connection Establishment"), CONNECTION_ERROR for
// everything else, RESUME included ("Resume Operation": every ERROR sent
// during resumption is CONNECTION_ERROR or REJECTED_RESUME).
func connCode(t Type) ErrorCode {
	if t == TypeSetup {
		return ErrorCodeInvalidSetup
	}
	return ErrorCodeConnectionError
}

func itoa(n int) string { return strconv.Itoa(n) }
