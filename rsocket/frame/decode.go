package frame

import "encoding/binary"

// The views below are what the Parse functions return. Their slices point
// into the frame that was parsed: they are valid as long as that buffer is
// not reused, and are capped (three-index slices) so that appending to one
// never overwrites the bytes after it. A nil Metadata means the M flag was
// not set; a frame with M set and empty metadata gives a non-nil empty slice.

// Setup is a SETUP frame (0x01), always on stream 0.
type Setup struct {
	Header
	MajorVersion      uint16
	MinorVersion      uint16
	KeepaliveInterval uint32 // ms between client KEEPALIVEs, 1..2^31-1
	MaxLifetime       uint32 // ms without KEEPALIVE before the peer is dead, 1..2^31-1
	ResumeToken       []byte // nil unless the R flag is set
	MetadataMIME      []byte
	DataMIME          []byte
	Metadata          []byte
	Data              []byte
}

// Lease reports the L flag: the client will honor LEASE.
func (s Setup) Lease() bool { return s.Flags&FlagLease != 0 }

// ResumeEnabled reports the R flag: the client asks for resumption and sent
// a token.
func (s Setup) ResumeEnabled() bool { return s.Flags&FlagResume != 0 }

// Lease is a LEASE frame (0x02), always on stream 0. Its metadata has no
// length field: it is the rest of the frame.
type Lease struct {
	Header
	TTL              uint32 // ms, 0..2^31-1 (0 stops all requests)
	NumberOfRequests uint32 // 0..2^31-1
	Metadata         []byte
}

// Keepalive is a KEEPALIVE frame (0x03), always on stream 0.
type Keepalive struct {
	Header
	LastReceivedPosition uint64 // 0 when resume is not supported
	Data                 []byte
}

// Respond reports the R flag: the receiver must echo the data back in a
// KEEPALIVE without R.
func (k Keepalive) Respond() bool { return k.Flags&FlagRespond != 0 }

// RequestResponse is a REQUEST_RESPONSE frame (0x04).
type RequestResponse struct {
	Header
	Metadata []byte
	Data     []byte
}

// Follows reports the F flag.
func (r RequestResponse) Follows() bool { return r.Flags&FlagFollows != 0 }

// RequestFNF is a REQUEST_FNF frame (0x05).
type RequestFNF struct {
	Header
	Metadata []byte
	Data     []byte
}

// Follows reports the F flag.
func (r RequestFNF) Follows() bool { return r.Flags&FlagFollows != 0 }

// RequestStream is a REQUEST_STREAM frame (0x06).
type RequestStream struct {
	Header
	InitialN uint32 // 1..2^31-1
	Metadata []byte
	Data     []byte
}

// Follows reports the F flag.
func (r RequestStream) Follows() bool { return r.Flags&FlagFollows != 0 }

// RequestChannel is a REQUEST_CHANNEL frame (0x07).
type RequestChannel struct {
	Header
	InitialN uint32 // 1..2^31-1
	Metadata []byte
	Data     []byte
}

// Follows reports the F flag.
func (r RequestChannel) Follows() bool { return r.Flags&FlagFollows != 0 }

// Complete reports the C flag: the requester sends nothing after this.
func (r RequestChannel) Complete() bool { return r.Flags&FlagComplete != 0 }

// RequestN is a REQUEST_N frame (0x08).
type RequestN struct {
	Header
	N uint32 // 1..2^31-1
}

// Cancel is a CANCEL frame (0x09).
type Cancel struct {
	Header
}

// Payload is a PAYLOAD frame (0x0A).
type Payload struct {
	Header
	Metadata []byte
	Data     []byte
}

// Follows reports the F flag. A PAYLOAD with both F and C set is complete:
// the spec says F is then ignored, so Follows reports false.
func (p Payload) Follows() bool { return p.Flags&(FlagFollows|FlagComplete) == FlagFollows }

// Complete reports the C flag.
func (p Payload) Complete() bool { return p.Flags&FlagComplete != 0 }

// Next reports the N flag: the payload is an element (possibly empty).
func (p Payload) Next() bool { return p.Flags&FlagNext != 0 }

// ErrorFrame is an ERROR frame (0x0B). Stream 0 means the connection.
type ErrorFrame struct {
	Header
	Code ErrorCode
	Data []byte // UTF-8 message (SHOULD, not checked)
}

// Message returns Data as a string (this copies).
func (e ErrorFrame) Message() string { return string(e.Data) }

// MetadataPush is a METADATA_PUSH frame (0x0C), always on stream 0. Its
// metadata has no length field: it is the rest of the frame.
type MetadataPush struct {
	Header
	Metadata []byte
}

// Resume is a RESUME frame (0x0D), always on stream 0.
type Resume struct {
	Header
	MajorVersion                 uint16
	MinorVersion                 uint16
	ResumeToken                  []byte
	LastReceivedServerPosition   uint64
	FirstAvailableClientPosition uint64
}

// ResumeOK is a RESUME_OK frame (0x0E), always on stream 0.
type ResumeOK struct {
	Header
	LastReceivedClientPosition uint64
}

// Ext is an EXT frame (0x3F). The spec leaves the body to the extended type;
// this package splits it like every other frame (a 24-bit metadata length
// when M is set, then data), which is what rsocket-java writes.
type Ext struct {
	Header
	ExtendedType uint32 // 1..2^31-1
	Metadata     []byte
	Data         []byte
}

// Validate parses the frame b with the Parse function of its type and
// returns only the header and the error: use it to check a frame before
// queueing it, or to classify a frame the caller does not otherwise handle.
// An unknown type is an ignorable error if its I flag is set and a
// connection error otherwise.
func Validate(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	switch h.Type {
	case TypeSetup:
		_, err = ParseSetup(b)
	case TypeLease:
		_, err = ParseLease(b)
	case TypeKeepalive:
		_, err = ParseKeepalive(b)
	case TypeRequestResponse:
		_, err = ParseRequestResponse(b)
	case TypeRequestFNF:
		_, err = ParseRequestFNF(b)
	case TypeRequestStream:
		_, err = ParseRequestStream(b)
	case TypeRequestChannel:
		_, err = ParseRequestChannel(b)
	case TypeRequestN:
		_, err = ParseRequestN(b)
	case TypeCancel:
		_, err = ParseCancel(b)
	case TypePayload:
		_, err = ParsePayload(b)
	case TypeError:
		_, err = ParseError(b)
	case TypeMetadataPush:
		_, err = ParseMetadataPush(b)
	case TypeResume:
		_, err = ParseResume(b)
	case TypeResumeOK:
		_, err = ParseResumeOK(b)
	case TypeExt:
		_, err = ParseExt(b)
	default:
		err = fail(h, KindConnection, ErrorCodeConnectionError, ErrUnknownType, "")
	}
	return h, err
}

// begin reads the header of b, checks it is of type t and that it is on a
// stream t may use. Stream rules (Protocol.md "Connection Establishment"
// and "Handling the Unexpected"): SETUP and RESUME on a stream other than 0
// are answered with ERROR[INVALID_SETUP]; the other connection frames on a
// non-zero stream, and stream frames on stream 0, are ignored.
func begin(b []byte, t Type) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Type != t {
		return h, &DecodeError{Kind: KindConnection, Code: ErrorCodeConnectionError, Type: h.Type,
			StreamID: h.StreamID, Flags: h.Flags, Err: ErrWrongType, Detail: "want " + t.String()}
	}
	switch t {
	case TypeSetup, TypeResume:
		if h.StreamID != 0 {
			return h, fail(h, KindConnection, ErrorCodeInvalidSetup, ErrStreamID, "must be on stream 0")
		}
	case TypeLease, TypeKeepalive, TypeMetadataPush, TypeResumeOK:
		if h.StreamID != 0 {
			return h, fail(h, KindIgnore, 0, ErrStreamID, "must be on stream 0")
		}
	case TypeRequestResponse, TypeRequestFNF, TypeRequestStream, TypeRequestChannel,
		TypeRequestN, TypeCancel, TypePayload:
		if h.StreamID == 0 {
			return h, fail(h, KindIgnore, 0, ErrStreamID, "not allowed on stream 0")
		}
	}
	return h, nil
}

func truncated(h Header, need, have int) error {
	return fail(h, KindConnection, connCode(h.Type), ErrTruncated,
		"needs at least "+itoa(need)+" bytes, has "+itoa(have))
}

func trailing(h Header, want, have int) error {
	return fail(h, KindConnection, connCode(h.Type), ErrTrailingBytes,
		"is "+itoa(want)+" bytes, got "+itoa(have))
}

// body splits b[off:] into metadata and data. With the M flag, a 24-bit
// metadata length comes first and must fit in what is left of the frame.
func body(h Header, b []byte, off int) (metadata, data []byte, err error) {
	if h.Flags&FlagMetadata == 0 {
		return nil, b[off:], nil
	}
	if len(b)-off < MetadataLengthSize {
		return nil, nil, truncated(h, off+MetadataLengthSize, len(b))
	}
	n := int(b[off])<<16 | int(b[off+1])<<8 | int(b[off+2])
	off += MetadataLengthSize
	if n > len(b)-off {
		return nil, nil, fail(h, KindConnection, connCode(h.Type), ErrMetadataLength,
			"metadata length "+itoa(n)+", "+itoa(len(b)-off)+" bytes left")
	}
	end := off + n
	return b[off:end:end], b[end:], nil
}

// field returns the n bytes at off, capped so appends cannot spill over.
func field(b []byte, off, n int) []byte { return b[off : off+n : off+n] }

// ParseSetup parses a SETUP frame. A malformed SETUP is answered with
// ERROR[INVALID_SETUP]; the version is returned as sent (the server decides
// whether it supports it: UNSUPPORTED_SETUP).
func ParseSetup(b []byte) (Setup, error) {
	h, err := begin(b, TypeSetup)
	if err != nil {
		return Setup{}, err
	}
	const fixed = HeaderSize + 12
	if len(b) < fixed {
		return Setup{}, truncated(h, fixed, len(b))
	}
	s := Setup{
		Header:            h,
		MajorVersion:      binary.BigEndian.Uint16(b[6:]),
		MinorVersion:      binary.BigEndian.Uint16(b[8:]),
		KeepaliveInterval: binary.BigEndian.Uint32(b[10:]),
		MaxLifetime:       binary.BigEndian.Uint32(b[14:]),
	}
	if s.KeepaliveInterval == 0 || s.KeepaliveInterval > max31 {
		return Setup{}, fail(h, KindConnection, ErrorCodeInvalidSetup, ErrInvalidField,
			"keepalive interval "+itoa(int(s.KeepaliveInterval))+" ms, must be 1..2^31-1")
	}
	if s.MaxLifetime == 0 || s.MaxLifetime > max31 {
		return Setup{}, fail(h, KindConnection, ErrorCodeInvalidSetup, ErrInvalidField,
			"max lifetime "+itoa(int(s.MaxLifetime))+" ms, must be 1..2^31-1")
	}
	off := fixed
	if h.Flags&FlagResume != 0 {
		if len(b)-off < 2 {
			return Setup{}, truncated(h, off+2, len(b))
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		off += 2
		if len(b)-off < n {
			return Setup{}, truncated(h, off+n, len(b))
		}
		s.ResumeToken = field(b, off, n)
		off += n
	}
	for i := 0; i < 2; i++ {
		if len(b)-off < 1 {
			return Setup{}, truncated(h, off+1, len(b))
		}
		n := int(b[off])
		off++
		if len(b)-off < n {
			return Setup{}, truncated(h, off+n, len(b))
		}
		if i == 0 {
			s.MetadataMIME = field(b, off, n)
		} else {
			s.DataMIME = field(b, off, n)
		}
		off += n
	}
	if s.Metadata, s.Data, err = body(h, b, off); err != nil {
		return Setup{}, err
	}
	return s, nil
}

// ParseLease parses a LEASE frame.
func ParseLease(b []byte) (Lease, error) {
	h, err := begin(b, TypeLease)
	if err != nil {
		return Lease{}, err
	}
	const fixed = HeaderSize + 8
	if len(b) < fixed {
		return Lease{}, truncated(h, fixed, len(b))
	}
	l := Lease{Header: h, TTL: binary.BigEndian.Uint32(b[6:]), NumberOfRequests: binary.BigEndian.Uint32(b[10:])}
	// The spec says both MUST be > 0 and, a few lines later, that a
	// responder MAY send 0 to stop all requests: accept 0.
	if l.TTL > max31 || l.NumberOfRequests > max31 {
		return Lease{}, fail(h, KindConnection, ErrorCodeConnectionError, ErrInvalidField, "TTL or number of requests >= 2^31")
	}
	if h.Flags&FlagMetadata != 0 {
		l.Metadata = b[fixed:]
	} else if len(b) != fixed {
		return Lease{}, trailing(h, fixed, len(b))
	}
	return l, nil
}

// ParseKeepalive parses a KEEPALIVE frame.
func ParseKeepalive(b []byte) (Keepalive, error) {
	h, err := begin(b, TypeKeepalive)
	if err != nil {
		return Keepalive{}, err
	}
	const fixed = HeaderSize + 8
	if len(b) < fixed {
		return Keepalive{}, truncated(h, fixed, len(b))
	}
	k := Keepalive{Header: h, LastReceivedPosition: binary.BigEndian.Uint64(b[6:]), Data: b[fixed:]}
	if k.LastReceivedPosition > MaxPosition {
		return Keepalive{}, fail(h, KindConnection, ErrorCodeConnectionError, ErrInvalidField, "last received position >= 2^63")
	}
	return k, nil
}

// ParseRequestResponse parses a REQUEST_RESPONSE frame.
func ParseRequestResponse(b []byte) (RequestResponse, error) {
	h, err := begin(b, TypeRequestResponse)
	if err != nil {
		return RequestResponse{}, err
	}
	md, d, err := body(h, b, HeaderSize)
	if err != nil {
		return RequestResponse{}, err
	}
	return RequestResponse{Header: h, Metadata: md, Data: d}, nil
}

// ParseRequestFNF parses a REQUEST_FNF frame.
func ParseRequestFNF(b []byte) (RequestFNF, error) {
	h, err := begin(b, TypeRequestFNF)
	if err != nil {
		return RequestFNF{}, err
	}
	md, d, err := body(h, b, HeaderSize)
	if err != nil {
		return RequestFNF{}, err
	}
	return RequestFNF{Header: h, Metadata: md, Data: d}, nil
}

// requestN reads and checks the 31-bit N at b[6:10]. An N of 0 or with the
// top bit set is a stream error: the frame is intact, the request is not.
func requestN(h Header, b []byte) (uint32, error) {
	n := binary.BigEndian.Uint32(b[6:])
	if n == 0 || n > max31 {
		return 0, fail(h, KindStream, ErrorCodeInvalid, ErrInvalidN, "N = "+itoa(int(int32(n))))
	}
	return n, nil
}

// ParseRequestStream parses a REQUEST_STREAM frame.
func ParseRequestStream(b []byte) (RequestStream, error) {
	h, err := begin(b, TypeRequestStream)
	if err != nil {
		return RequestStream{}, err
	}
	if len(b) < HeaderSize+4 {
		return RequestStream{}, truncated(h, HeaderSize+4, len(b))
	}
	md, d, err := body(h, b, HeaderSize+4)
	if err != nil {
		return RequestStream{}, err
	}
	n, err := requestN(h, b)
	if err != nil {
		return RequestStream{}, err
	}
	return RequestStream{Header: h, InitialN: n, Metadata: md, Data: d}, nil
}

// ParseRequestChannel parses a REQUEST_CHANNEL frame.
func ParseRequestChannel(b []byte) (RequestChannel, error) {
	h, err := begin(b, TypeRequestChannel)
	if err != nil {
		return RequestChannel{}, err
	}
	if len(b) < HeaderSize+4 {
		return RequestChannel{}, truncated(h, HeaderSize+4, len(b))
	}
	md, d, err := body(h, b, HeaderSize+4)
	if err != nil {
		return RequestChannel{}, err
	}
	n, err := requestN(h, b)
	if err != nil {
		return RequestChannel{}, err
	}
	return RequestChannel{Header: h, InitialN: n, Metadata: md, Data: d}, nil
}

// ParseRequestN parses a REQUEST_N frame.
func ParseRequestN(b []byte) (RequestN, error) {
	h, err := begin(b, TypeRequestN)
	if err != nil {
		return RequestN{}, err
	}
	const size = HeaderSize + 4
	if len(b) < size {
		return RequestN{}, truncated(h, size, len(b))
	}
	if len(b) != size {
		return RequestN{}, trailing(h, size, len(b))
	}
	n, err := requestN(h, b)
	if err != nil {
		return RequestN{}, err
	}
	return RequestN{Header: h, N: n}, nil
}

// ParseCancel parses a CANCEL frame.
func ParseCancel(b []byte) (Cancel, error) {
	h, err := begin(b, TypeCancel)
	if err != nil {
		return Cancel{}, err
	}
	if len(b) != HeaderSize {
		return Cancel{}, trailing(h, HeaderSize, len(b))
	}
	return Cancel{Header: h}, nil
}

// ParsePayload parses a PAYLOAD frame. A PAYLOAD with none of the N, C and
// F flags carries nothing the spec allows ("MUST NOT have both (C)omplete
// and (N)ext empty"); it fails its stream. F alone is accepted because a
// fragment in the middle of a sequence is neither an element nor the end.
func ParsePayload(b []byte) (Payload, error) {
	h, err := begin(b, TypePayload)
	if err != nil {
		return Payload{}, err
	}
	md, d, err := body(h, b, HeaderSize)
	if err != nil {
		return Payload{}, err
	}
	if h.Flags&(FlagNext|FlagComplete|FlagFollows) == 0 {
		return Payload{}, fail(h, KindStream, ErrorCodeInvalid, ErrInvalidFlags, "none of N, C, F set")
	}
	return Payload{Header: h, Metadata: md, Data: d}, nil
}

// ParseError parses an ERROR frame. Which codes are allowed on which stream
// is left to the caller (ErrorCode.IsConnectionScoped).
func ParseError(b []byte) (ErrorFrame, error) {
	h, err := begin(b, TypeError)
	if err != nil {
		return ErrorFrame{}, err
	}
	const fixed = HeaderSize + 4
	if len(b) < fixed {
		return ErrorFrame{}, truncated(h, fixed, len(b))
	}
	return ErrorFrame{Header: h, Code: ErrorCode(binary.BigEndian.Uint32(b[6:])), Data: b[fixed:]}, nil
}

// ParseMetadataPush parses a METADATA_PUSH frame. The M flag is always set
// by senders; its absence is tolerated (unknown or misused flag bits are
// "not interpreted on reception").
func ParseMetadataPush(b []byte) (MetadataPush, error) {
	h, err := begin(b, TypeMetadataPush)
	if err != nil {
		return MetadataPush{}, err
	}
	return MetadataPush{Header: h, Metadata: b[HeaderSize:]}, nil
}

// ParseResume parses a RESUME frame.
func ParseResume(b []byte) (Resume, error) {
	h, err := begin(b, TypeResume)
	if err != nil {
		return Resume{}, err
	}
	off := HeaderSize + 6
	if len(b) < off {
		return Resume{}, truncated(h, off, len(b))
	}
	r := Resume{Header: h, MajorVersion: binary.BigEndian.Uint16(b[6:]), MinorVersion: binary.BigEndian.Uint16(b[8:])}
	n := int(binary.BigEndian.Uint16(b[10:]))
	if len(b)-off < n+16 {
		return Resume{}, truncated(h, off+n+16, len(b))
	}
	r.ResumeToken = field(b, off, n)
	off += n
	if len(b) != off+16 {
		return Resume{}, trailing(h, off+16, len(b))
	}
	r.LastReceivedServerPosition = binary.BigEndian.Uint64(b[off:])
	r.FirstAvailableClientPosition = binary.BigEndian.Uint64(b[off+8:])
	if r.LastReceivedServerPosition > MaxPosition || r.FirstAvailableClientPosition > MaxPosition {
		return Resume{}, fail(h, KindConnection, ErrorCodeConnectionError, ErrInvalidField, "position >= 2^63")
	}
	return r, nil
}

// ParseResumeOK parses a RESUME_OK frame.
func ParseResumeOK(b []byte) (ResumeOK, error) {
	h, err := begin(b, TypeResumeOK)
	if err != nil {
		return ResumeOK{}, err
	}
	const size = HeaderSize + 8
	if len(b) < size {
		return ResumeOK{}, truncated(h, size, len(b))
	}
	if len(b) != size {
		return ResumeOK{}, trailing(h, size, len(b))
	}
	r := ResumeOK{Header: h, LastReceivedClientPosition: binary.BigEndian.Uint64(b[6:])}
	if r.LastReceivedClientPosition > MaxPosition {
		return ResumeOK{}, fail(h, KindConnection, ErrorCodeConnectionError, ErrInvalidField, "position >= 2^63")
	}
	return r, nil
}

// ParseExt parses an EXT frame.
func ParseExt(b []byte) (Ext, error) {
	h, err := begin(b, TypeExt)
	if err != nil {
		return Ext{}, err
	}
	const fixed = HeaderSize + 4
	if len(b) < fixed {
		return Ext{}, truncated(h, fixed, len(b))
	}
	e := Ext{Header: h, ExtendedType: binary.BigEndian.Uint32(b[6:])}
	if e.ExtendedType == 0 || e.ExtendedType > max31 {
		return Ext{}, fail(h, KindConnection, ErrorCodeConnectionError, ErrInvalidField, "extended type must be 1..2^31-1")
	}
	if e.Metadata, e.Data, err = body(h, b, fixed); err != nil {
		return Ext{}, err
	}
	return e, nil
}
