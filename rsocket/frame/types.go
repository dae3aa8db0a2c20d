package frame

import "strconv"

// Type is the 6-bit frame type (Protocol.md "Frame Types").
type Type uint8

// Frame types of RSocket Protocol 1.0.
const (
	TypeReserved        Type = 0x00
	TypeSetup           Type = 0x01
	TypeLease           Type = 0x02
	TypeKeepalive       Type = 0x03
	TypeRequestResponse Type = 0x04
	TypeRequestFNF      Type = 0x05
	TypeRequestStream   Type = 0x06
	TypeRequestChannel  Type = 0x07
	TypeRequestN        Type = 0x08
	TypeCancel          Type = 0x09
	TypePayload         Type = 0x0A
	TypeError           Type = 0x0B
	TypeMetadataPush    Type = 0x0C
	TypeResume          Type = 0x0D
	TypeResumeOK        Type = 0x0E
	TypeExt             Type = 0x3F
)

var typeNames = [...]string{
	TypeReserved:        "RESERVED",
	TypeSetup:           "SETUP",
	TypeLease:           "LEASE",
	TypeKeepalive:       "KEEPALIVE",
	TypeRequestResponse: "REQUEST_RESPONSE",
	TypeRequestFNF:      "REQUEST_FNF",
	TypeRequestStream:   "REQUEST_STREAM",
	TypeRequestChannel:  "REQUEST_CHANNEL",
	TypeRequestN:        "REQUEST_N",
	TypeCancel:          "CANCEL",
	TypePayload:         "PAYLOAD",
	TypeError:           "ERROR",
	TypeMetadataPush:    "METADATA_PUSH",
	TypeResume:          "RESUME",
	TypeResumeOK:        "RESUME_OK",
}

// String returns the spec's name of the type ("REQUEST_STREAM"), or
// "UNKNOWN(0x..)" for a value the protocol does not define.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	if t == TypeExt {
		return "EXT"
	}
	return "UNKNOWN(0x" + strconv.FormatUint(uint64(t), 16) + ")"
}

// Known reports whether t is a frame type this package can parse.
// TypeReserved is not known: the spec reserves it, no peer may send it.
func (t Type) Known() bool {
	return (t >= TypeSetup && t <= TypeResumeOK) || t == TypeExt
}

// IsRequest reports whether t starts a stream (REQUEST_RESPONSE, REQUEST_FNF,
// REQUEST_STREAM, REQUEST_CHANNEL).
func (t Type) IsRequest() bool {
	return t >= TypeRequestResponse && t <= TypeRequestChannel
}

// IsResumable reports whether a frame of type t on stream streamID counts
// toward the resume positions sent in KEEPALIVE, RESUME and RESUME_OK and
// is retained for replay: every frame on a stream other than 0, whatever
// its type. The position counts the frame's bytes without the TCP length
// prefix and after fragmentation.
//
// This is rsocket-java's rule (a frame counts when its stream id is not
// 0), the one sluice follows on both ends. Protocol.md "Implied Position"
// lists types instead (REQUEST_*, REQUEST_N, CANCEL, ERROR, PAYLOAD); the
// two differ only for EXT frames on a stream (and for frames that are
// malformed on a stream, which peers do not send): Java counts and retains
// them, and so must sluice, whose byte-credits grants (EXT
// ExtRequestBytes, rsocket/conn/bytecredits.go) are flow-control state
// like REQUEST_N: a grant lost in a cut must be replayed, or the stream
// waits for bytes its receiver believes it granted. Frames on stream 0
// (SETUP, LEASE, KEEPALIVE, METADATA_PUSH, RESUME, RESUME_OK, a connection
// ERROR, EXT on stream 0) never count: an ERROR on stream 0 ends the
// connection, so its position is never needed. rsocket-js counts by the
// spec's type list; it sends no EXT frames, so positions agree with it as
// well.
//
// t is kept in the signature for callers that have it; the rule does not
// depend on it.
func IsResumable(t Type, streamID uint32) bool {
	_ = t
	return streamID != 0
}

// Flags are the 10 flag bits of the frame header. Which bits mean what
// depends on the frame type; the I and M bits mean the same for every type.
type Flags uint16

// Flag bits (Protocol.md "Frame Header Format" and each frame's section).
// Several names share a bit: FlagFollows, FlagResume and FlagRespond are all
// 0x080, FlagComplete and FlagLease are 0x040.
const (
	FlagIgnore   Flags = 0x200 // I: the frame may be ignored if not understood
	FlagMetadata Flags = 0x100 // M: metadata present
	FlagFollows  Flags = 0x080 // F: more fragments follow (REQUEST_*, PAYLOAD)
	FlagComplete Flags = 0x040 // C: stream complete (REQUEST_CHANNEL, PAYLOAD)
	FlagNext     Flags = 0x020 // N: payload is an onNext (PAYLOAD)
	FlagResume   Flags = 0x080 // R: resume enabled, token present (SETUP)
	FlagLease    Flags = 0x040 // L: will honor LEASE (SETUP)
	FlagRespond  Flags = 0x080 // R: respond with a KEEPALIVE (KEEPALIVE)

	flagMask Flags = 0x3FF
)

// Has reports whether all bits of f2 are set in f.
func (f Flags) Has(f2 Flags) bool { return f&f2 == f2 }

// ErrorCode is the 32-bit code of an ERROR frame (Protocol.md "Error Codes").
type ErrorCode uint32

// Error codes of RSocket Protocol 1.0. Codes 0x00000301 to 0xFFFFFFFE are for
// applications; the rest of 0x0001-0x0300 is reserved by the protocol.
const (
	ErrorCodeReserved          ErrorCode = 0x00000000
	ErrorCodeInvalidSetup      ErrorCode = 0x00000001 // stream 0
	ErrorCodeUnsupportedSetup  ErrorCode = 0x00000002 // stream 0
	ErrorCodeRejectedSetup     ErrorCode = 0x00000003 // stream 0
	ErrorCodeRejectedResume    ErrorCode = 0x00000004 // stream 0; the client must not retry resume
	ErrorCodeConnectionError   ErrorCode = 0x00000101 // stream 0; close at once
	ErrorCodeConnectionClose   ErrorCode = 0x00000102 // stream 0; drain streams, then close
	ErrorCodeApplicationError  ErrorCode = 0x00000201 // stream > 0
	ErrorCodeRejected          ErrorCode = 0x00000202 // stream > 0; request not processed
	ErrorCodeCanceled          ErrorCode = 0x00000203 // stream > 0; may have been processed
	ErrorCodeInvalid           ErrorCode = 0x00000204 // stream > 0
	ErrorCodeReservedExtension ErrorCode = 0xFFFFFFFF

	// ErrorCodeMinApplication and ErrorCodeMaxApplication bound the codes an
	// application may define.
	ErrorCodeMinApplication ErrorCode = 0x00000301
	ErrorCodeMaxApplication ErrorCode = 0xFFFFFFFE
)

// String returns the spec's name ("CONNECTION_ERROR"), "APPLICATION(0x...)"
// for application-defined codes and "UNKNOWN(0x...)" otherwise.
func (c ErrorCode) String() string {
	switch c {
	case ErrorCodeReserved:
		return "RESERVED"
	case ErrorCodeInvalidSetup:
		return "INVALID_SETUP"
	case ErrorCodeUnsupportedSetup:
		return "UNSUPPORTED_SETUP"
	case ErrorCodeRejectedSetup:
		return "REJECTED_SETUP"
	case ErrorCodeRejectedResume:
		return "REJECTED_RESUME"
	case ErrorCodeConnectionError:
		return "CONNECTION_ERROR"
	case ErrorCodeConnectionClose:
		return "CONNECTION_CLOSE"
	case ErrorCodeApplicationError:
		return "APPLICATION_ERROR"
	case ErrorCodeRejected:
		return "REJECTED"
	case ErrorCodeCanceled:
		return "CANCELED"
	case ErrorCodeInvalid:
		return "INVALID"
	case ErrorCodeReservedExtension:
		return "RESERVED_EXTENSION"
	}
	if c.IsApplication() {
		return "APPLICATION(0x" + strconv.FormatUint(uint64(c), 16) + ")"
	}
	return "UNKNOWN(0x" + strconv.FormatUint(uint64(c), 16) + ")"
}

// IsApplication reports whether c is in the application-defined range.
func (c ErrorCode) IsApplication() bool {
	return c >= ErrorCodeMinApplication && c <= ErrorCodeMaxApplication
}

// IsConnectionScoped reports whether the spec requires stream id 0 for c
// (the SETUP, RESUME and CONNECTION_* codes).
func (c ErrorCode) IsConnectionScoped() bool {
	switch c {
	case ErrorCodeInvalidSetup, ErrorCodeUnsupportedSetup, ErrorCodeRejectedSetup,
		ErrorCodeRejectedResume, ErrorCodeConnectionError, ErrorCodeConnectionClose:
		return true
	}
	return false
}
