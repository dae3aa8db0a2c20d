package extension

import (
	"fmt"
	"slices"
	"strconv"
)

// Authentication metadata (Extensions/Security/Authentication.md, MIME
// message/x.rsocket.authentication.v0):
//
//	1 byte   A bit + 7 bits: with A, a well-known auth type id; without A,
//	         the length of the auth type string that follows, MINUS ONE
//	n bytes  auth type string (only without A)
//	rest     the payload, whose layout depends on the type
//
// The length-1 encoding is rsocket-java's (AuthMetadataCodec), as for
// composite metadata MIME types; the spec text says "length". Payloads:
//
//	simple  2 bytes username length, username, password (the rest);
//	        Extensions/Security/Simple.md. rsocket-java before 1.0.3
//	        wrote a 1-byte length (fixed in rsocket-java #938).
//	bearer  the token (the rest); Extensions/Security/Bearer.md.

// AuthType is a well-known authentication type id
// (Extensions/Security/WellKnownAuthTypes.md).
type AuthType uint8

const (
	AuthSimple AuthType = 0x00
	AuthBearer AuthType = 0x01
)

// String returns "simple", "bearer", or "AuthType(0x..)" for other ids.
func (a AuthType) String() string {
	switch a {
	case AuthSimple:
		return "simple"
	case AuthBearer:
		return "bearer"
	}
	return "AuthType(0x" + strconv.FormatUint(uint64(a), 16) + ")"
}

// Auth is parsed authentication metadata. Its slices point into the
// metadata it was read from.
type Auth struct {
	WellKnown  bool
	ID         AuthType // when WellKnown
	CustomType []byte   // when not WellKnown, 1..128 bytes
	Payload    []byte
}

// Is reports whether the auth is of well-known type id.
func (a Auth) Is(id AuthType) bool { return a.WellKnown && a.ID == id }

// ParseAuth parses authentication metadata b.
func ParseAuth(b []byte) (Auth, error) {
	if len(b) == 0 {
		return Auth{}, &MalformedError{Format: "authentication", Detail: "empty"}
	}
	c := b[0]
	if c&0x80 != 0 {
		return Auth{WellKnown: true, ID: AuthType(c & 0x7F), Payload: b[1:]}, nil
	}
	n := int(c) + 1
	if len(b)-1 < n {
		return Auth{}, &MalformedError{Format: "authentication", Detail: fmt.Sprintf("auth type of %d bytes, %d left", n, len(b)-1)}
	}
	return Auth{CustomType: b[1 : 1+n : 1+n], Payload: b[1+n:]}, nil
}

// Simple splits the payload of a "simple" auth into username and password.
// It fails if the auth is not of type simple or the username length runs
// past the payload.
func (a Auth) Simple() (username, password []byte, err error) {
	if !a.Is(AuthSimple) {
		return nil, nil, &MalformedError{Format: "authentication", Detail: "not simple auth"}
	}
	p := a.Payload
	if len(p) < 2 {
		return nil, nil, &MalformedError{Format: "authentication", Offset: 1, Detail: "simple auth without a username length"}
	}
	n := int(p[0])<<8 | int(p[1])
	if len(p)-2 < n {
		return nil, nil, &MalformedError{Format: "authentication", Offset: 1,
			Detail: fmt.Sprintf("username of %d bytes, %d left", n, len(p)-2)}
	}
	return p[2 : 2+n : 2+n], p[2+n:], nil
}

// Bearer returns the token of a "bearer" auth; ok is false for other types.
func (a Auth) Bearer() (token []byte, ok bool) {
	if !a.Is(AuthBearer) {
		return nil, false
	}
	return a.Payload, true
}

// AppendAuthSimple appends simple authentication (username at most 65,535
// bytes).
func AppendAuthSimple(dst []byte, username, password string) ([]byte, error) {
	if len(username) > 0xFFFF {
		return dst, fmt.Errorf("rsocket: simple auth username of %d bytes: %w (max 65535)", len(username), ErrTooLong)
	}
	b := slices.Grow(dst, 3+len(username)+len(password))
	b = append(b, 0x80|byte(AuthSimple), byte(len(username)>>8), byte(len(username)))
	b = append(b, username...)
	return append(b, password...), nil
}

// AppendAuthBearer appends bearer token authentication.
func AppendAuthBearer(dst []byte, token string) []byte {
	b := slices.Grow(dst, 1+len(token))
	b = append(b, 0x80|byte(AuthBearer))
	return append(b, token...)
}

// AppendAuthWellKnown appends authentication of well-known type id (0..0x7F)
// with an opaque payload.
func AppendAuthWellKnown(dst []byte, id AuthType, payload []byte) ([]byte, error) {
	if id > 0x7F {
		return dst, fmt.Errorf("rsocket: auth type id 0x%x: %w (max 0x7f)", uint8(id), ErrTooLong)
	}
	b := slices.Grow(dst, 1+len(payload))
	b = append(b, 0x80|byte(id))
	return append(b, payload...), nil
}

// AppendAuthCustom appends authentication of type authType (1..128 US-ASCII
// bytes). "simple" and "bearer" are encoded by id, as rsocket-java's
// encodeMetadataWithCompression does.
func AppendAuthCustom(dst []byte, authType string, payload []byte) ([]byte, error) {
	switch authType {
	case "simple":
		return AppendAuthWellKnown(dst, AuthSimple, payload)
	case "bearer":
		return AppendAuthWellKnown(dst, AuthBearer, payload)
	}
	if err := checkTypeString("auth type", authType); err != nil {
		return dst, err
	}
	b := slices.Grow(dst, 1+len(authType)+len(payload))
	b = append(b, byte(len(authType)-1))
	b = append(b, authType...)
	return append(b, payload...), nil
}
