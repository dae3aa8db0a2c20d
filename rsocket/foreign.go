package rsocket

import (
	"bytes"
	"errors"
	"io"
	"syscall"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// A peer that dialled the wrong kind of listener, or a listener of the
// wrong kind: told from the first bytes of a byte stream (TCP, TLS),
// without waiting for the setup timeout (docs/reliability.md).
//
// A server reads its connection's first bytes as a frame's length prefix
// (3 bytes), stream id (4) and type and flags (2). "PRI" (an HTTP/2
// client preface), "GET" (an HTTP/1 request) or 0x16 0x03 0x01 (a TLS
// ClientHello) declare frames of 1.4 to 5.3 MB, whose rest never comes:
// before, such a client waited for the server's setup timeout (10 s).
// Now the connection is closed as soon as its first bytes match one of
// those signatures AND its stream id is not 0: a client's first frame is
// a SETUP or a RESUME, both on stream 0, so no RSocket client is ever
// refused by this; a first frame that merely is not a SETUP still gets
// the machine's answer, ERROR[INVALID_SETUP].
//
// A client (of Dial, over tcp:// and tls://) reads the server's first
// bytes the same way: an HTTP/1 response ("HTTP/1.1": a METADATA_PUSH on
// a stream other than 0) or an HTTP/2 server preface (a SETTINGS frame:
// type RESERVED in RSocket's framing) is no RSocket server's first frame.
// And a server that closes the connection before its first byte most
// likely speaks another protocol, or TLS where the client speaks plain
// text (Go's TLS server closes without a word at a record that is not
// a handshake): the error says which listener the URL should name.

// NotRSocketError is a connection whose peer does not speak RSocket, by
// its first bytes, or (a client's) because the server closed it before
// sending any. The streams of a client's connection fail with an *Error
// that wraps it (errors.As finds it).
type NotRSocketError struct {
	// Peer is the URL dialled (a client's) or the peer's address (a
	// server's).
	Peer string
	// Looks is what the peer's first bytes look like ("an HTTP/2 client
	// preface"); "": a server closed the connection before sending any.
	Looks string
	// Hint says what the URL should be.
	Hint string
}

func (e *NotRSocketError) Error() string {
	s := e.Peer
	if s == "" {
		s = "the peer"
	}
	if e.Looks == "" {
		s += " closed the connection before answering"
	} else {
		s += " sent " + e.Looks + ", not RSocket"
	}
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// sniffRole says which end's first bytes a frameReader checks.
type sniffRole uint8

const (
	sniffOff    sniffRole = iota
	sniffServer           // a client's first bytes, on a server's connection
	sniffClient           // a server's first bytes, on a client's connection
)

// signature is the first bytes of another protocol.
type signature struct {
	b     string
	free  uint32 // bit i set: byte i may be anything
	looks string
}

var serverSignatures = []signature{
	{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0, "an HTTP/2 client preface (a gRPC or HTTP/2 client)"},
	{"GET ", 0, "an HTTP/1 request (an HTTP or WebSocket client)"},
	{"POST ", 0, "an HTTP/1 request (an HTTP client)"},
	{"PUT ", 0, "an HTTP/1 request (an HTTP client)"},
	{"HEAD ", 0, "an HTTP/1 request (an HTTP client)"},
	{"PATCH ", 0, "an HTTP/1 request (an HTTP client)"},
	{"OPTIONS ", 0, "an HTTP/1 request (an HTTP client)"},
	// A TLS record (0x16: handshake, version 3.x, any minor), whose
	// handshake message is a ClientHello (0x01, after the 2-byte record
	// length).
	{"\x16\x03\x00\x00\x00\x01", 1<<2 | 1<<3 | 1<<4, "a TLS ClientHello (a TLS client)"},
}

var clientSignatures = []signature{
	{"HTTP/1.", 0, "an HTTP/1 response (an HTTP or WebSocket listener)"},
	// An HTTP/2 SETTINGS frame (type 0x04) on stream 0, of any length,
	// with or without ACK.
	{"\x00\x00\x00\x04\x00\x00\x00\x00", 1<<0 | 1<<1 | 1<<2 | 1<<4, "an HTTP/2 preface (a gRPC or HTTP/2 listener)"},
}

// sniffLen is how many bytes decide: a server's stream id, and a client's
// type byte, are within them.
const sniffLen = frame.LengthPrefixSize + 6

// foreign says what b, a connection's first bytes, look like ("" and
// decided: RSocket, or nothing it knows) once enough came to decide.
func foreign(b []byte, role sniffRole) (looks string, decided bool) {
	if len(b) < sniffLen {
		return "", false
	}
	sigs := serverSignatures
	if role == sniffClient {
		sigs = clientSignatures
	}
	for _, s := range sigs {
		if !matches(b, s) {
			continue
		}
		if role == sniffServer && !notSetup(b) {
			continue
		}
		if role == sniffClient && !notServerFrame(b) {
			continue
		}
		return s.looks, true
	}
	return "", true
}

func matches(b []byte, s signature) bool {
	for i := 0; i < min(len(b), len(s.b)); i++ {
		if s.free&(1<<i) == 0 && b[i] != s.b[i] {
			return false
		}
	}
	return true
}

// notSetup: b's stream id is not 0, which SETUP and RESUME have.
func notSetup(b []byte) bool {
	return !bytes.Equal(b[frame.LengthPrefixSize:frame.LengthPrefixSize+4], []byte{0, 0, 0, 0})
}

// notServerFrame: b's type is RESERVED, or METADATA_PUSH on a stream
// other than 0; no server sends either.
func notServerFrame(b []byte) bool {
	t := frame.Type(b[frame.LengthPrefixSize+4] >> 2)
	return t == frame.TypeReserved || t == frame.TypeMetadataPush && notSetup(b)
}

// closedEarly says whether err ends a connection the peer closed (or
// reset) rather than one this end closed or a deadline ended.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// schemeHint says which listener a URL of scheme names (a client's
// NotRSocketError).
func schemeHint(scheme string) string {
	switch scheme {
	case "tcp":
		return "is it an RSocket listener (tcp://, not tls:// or ws://)?"
	case "tls":
		return "is it a TLS RSocket listener (tls://, not tcp:// or wss://)?"
	case "ws":
		return "is it a WebSocket RSocket listener (ws://, not tcp:// or wss://)?"
	case "wss":
		return "is it a WebSocket RSocket listener over TLS (wss://, not ws:// or tls://)?"
	}
	return ""
}
