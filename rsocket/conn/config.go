package conn

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Role says which end of the connection a Machine is.
type Role uint8

const (
	// Client sends SETUP and keepalives and uses odd stream ids.
	Client Role = iota + 1
	// Server waits for SETUP and uses even stream ids.
	Server
)

func (r Role) String() string {
	switch r {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Config configures a Machine. Zero values take the defaults given on each
// field.
type Config struct {
	Role Role

	// KeepaliveInterval is how often a client sends KEEPALIVE (sent in
	// SETUP). Default 20s. Must be whole milliseconds in 1ms..2^31-1ms.
	KeepaliveInterval time.Duration
	// MaxLifetime is how long a client waits without receiving any frame
	// before it declares the server dead (sent in SETUP; a server uses the
	// client's value). Default 90s.
	MaxLifetime time.Duration
	// MetadataMIME and DataMIME go in SETUP. Defaults
	// "message/x.rsocket.composite-metadata.v0" and "application/octet-stream".
	MetadataMIME, DataMIME string
	// SetupMetadata and SetupData are the SETUP payload (nil: none).
	SetupMetadata, SetupData []byte
	// Lease (client) sets the L flag in SETUP: both ends' requesters then
	// wait for a LEASE (EventLease) before requesting, and both responders
	// grant leases with SendLease (lease.go). Lease (server) accepts a
	// SETUP with L (the server then follows the client's choice); without
	// it such a SETUP is answered ERROR[UNSUPPORTED_SETUP] and the
	// connection closes, as Protocol.md "Connection Establishment" asks of
	// a server that does not accept a SETUP.
	Lease bool

	// MaxFrameSize is the largest frame this end sends, without the length
	// prefix; larger payloads are fragmented. Default and maximum
	// 16,777,215 (frame.MaxFrameSize); minimum 64. Frames that cannot be
	// fragmented must fit too: New refuses a SETUP that does not,
	// MetadataPush refuses larger metadata, ERROR messages and KEEPALIVE
	// echo data are cut to fit.
	MaxFrameSize int
	// MaxStreams bounds the streams alive at once, both directions
	// together. Default 10,000.
	MaxStreams int
	// MaxPayloadSize bounds one inbound payload, whole or reassembled from
	// fragments (metadata plus data), requests and PAYLOADs alike. Default
	// 64 MiB (DefaultMaxPayloadSize): fragmentation exists for payloads
	// above the 16 MiB frame limit, so the default must leave room for
	// them (rsocket-java and rsocket-py send 20 MiB requests fragmented).
	MaxPayloadSize int
	// MaxReassemblyBytes bounds the bytes held for all inbound payloads
	// being reassembled at once, on one connection. Default 64 MiB or
	// MaxPayloadSize if larger: one payload of the maximum size fits, and
	// so do several smaller ones together up to it. It is the
	// per-connection worst case of reassembly memory (plus the one frame
	// being read, at most MaxFrameSize); over it the connection closes
	// with CONNECTION_ERROR.
	MaxReassemblyBytes int

	// ByteCredits, when not 0, turns on sluice's byte-credits extension
	// (bytecredits.go, docs/rsocket.md): this end offers (client) or
	// accepts (server) it and grants each governed stream ByteCredits
	// bytes at its start (1..2^31-1); more are granted with RequestBytes.
	// A peer without the extension ignores it. 0: plain RSocket.
	ByteCredits uint32

	// LendFrames lets Receive hand the application the frame's own bytes
	// instead of a copy: the Metadata and Data of the events a frame
	// causes may alias the frame passed to Receive, so the caller must
	// leave that frame unchanged until Advance (the rsocket driver does:
	// it dispatches a frame's events before it reads the next). The
	// application copies what it keeps past Advance, as always. Without
	// it (the default) Receive copies into the machine's arena and the
	// caller may reuse the frame at once. It saves one copy of every
	// inbound payload: for a 1 MiB upload chunk, one of the two copies
	// the receive path made (docs/rsocket.md, "Who owns which bytes").
	LendFrames bool

	// ResumeToken (client), when not nil, asks for resumption (R flag in
	// SETUP, resume.go): the connection survives transport losses.
	ResumeToken []byte
	// Resume (server) accepts a SETUP with R; without it such a SETUP is
	// answered ERROR[REJECTED_SETUP].
	Resume bool
	// ResumeBufferBytes bounds the sent frames retained for replay until
	// the peer acknowledges them (KEEPALIVE position). The oldest are
	// dropped beyond it: a peer further behind cannot resume and is
	// rejected. Default 16 MiB.
	ResumeBufferBytes int
	// ResumeSessionLifetime is how long a session whose transport was lost
	// waits to be resumed before it closes. Default 60s.
	ResumeSessionLifetime time.Duration
}

// Defaults.
const (
	DefaultKeepaliveInterval = 20 * time.Second
	DefaultMaxLifetime       = 90 * time.Second
	DefaultMaxStreams        = 10000
	// DefaultMaxPayloadSize is 64 MiB, four frames' worth: fragmented
	// payloads above the 16 MiB frame limit are what fragmentation is
	// for. It was 16 MiB, the frame limit, which refused every one of them
	// ("reassembled payload exceeds 16777216 bytes").
	DefaultMaxPayloadSize = 64 << 20
	// DefaultMaxReassemblyBytes stays 64 MiB, equal to the payload
	// default: every set of payloads in reassembly at once that fit
	// before (each <= 16 MiB, together <= 64 MiB) still fits, one payload
	// up to 64 MiB now fits too, and the per-connection worst case does
	// not grow.
	DefaultMaxReassemblyBytes = 64 << 20
	DefaultMetadataMIME       = "message/x.rsocket.composite-metadata.v0"
	DefaultDataMIME           = "application/octet-stream"
	minFrameSize              = 64

	DefaultResumeBufferBytes     = 16 << 20
	DefaultResumeSessionLifetime = 60 * time.Second
)

func (c *Config) setDefaults() {
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.MaxLifetime == 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	if c.MetadataMIME == "" {
		c.MetadataMIME = DefaultMetadataMIME
	}
	if c.DataMIME == "" {
		c.DataMIME = DefaultDataMIME
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = frame.MaxFrameSize
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxPayloadSize == 0 {
		c.MaxPayloadSize = DefaultMaxPayloadSize
	}
	if c.ResumeBufferBytes == 0 {
		c.ResumeBufferBytes = DefaultResumeBufferBytes
	}
	if c.ResumeSessionLifetime == 0 {
		c.ResumeSessionLifetime = DefaultResumeSessionLifetime
	}
	if c.MaxReassemblyBytes == 0 {
		c.MaxReassemblyBytes = max(DefaultMaxReassemblyBytes, c.MaxPayloadSize)
	}
}

func (c *Config) validate() error {
	if c.Role != Client && c.Role != Server {
		return errors.New("rsocket/conn: Config.Role must be Client or Server")
	}
	ms := func(name string, d time.Duration) error {
		if d < time.Millisecond || d > (1<<31-1)*time.Millisecond || d%time.Millisecond != 0 {
			return fmt.Errorf("rsocket/conn: Config.%s %v must be whole milliseconds in 1ms..2^31-1ms", name, d)
		}
		return nil
	}
	if err := ms("KeepaliveInterval", c.KeepaliveInterval); err != nil {
		return err
	}
	if err := ms("MaxLifetime", c.MaxLifetime); err != nil {
		return err
	}
	if len(c.MetadataMIME) > frame.MaxMIMELength || len(c.DataMIME) > frame.MaxMIMELength {
		return fmt.Errorf("rsocket/conn: MIME types are limited to %d bytes", frame.MaxMIMELength)
	}
	if c.MaxFrameSize < minFrameSize || c.MaxFrameSize > frame.MaxFrameSize {
		return fmt.Errorf("rsocket/conn: Config.MaxFrameSize %d must be in %d..%d", c.MaxFrameSize, minFrameSize, frame.MaxFrameSize)
	}
	if c.ByteCredits > frame.MaxRequestN {
		return fmt.Errorf("rsocket/conn: Config.ByteCredits %d must be <= 2^31-1", c.ByteCredits)
	}
	if len(c.ResumeToken) > frame.MaxResumeTokenLength {
		return fmt.Errorf("rsocket/conn: Config.ResumeToken of %d bytes exceeds %d", len(c.ResumeToken), frame.MaxResumeTokenLength)
	}
	if c.ResumeBufferBytes < 0 || c.ResumeSessionLifetime < 0 {
		return errors.New("rsocket/conn: Config.ResumeBufferBytes and ResumeSessionLifetime must be >= 0")
	}
	if c.MaxStreams < 1 {
		return fmt.Errorf("rsocket/conn: Config.MaxStreams %d must be >= 1", c.MaxStreams)
	}
	if c.MaxPayloadSize < 1 || c.MaxReassemblyBytes < c.MaxPayloadSize {
		return fmt.Errorf("rsocket/conn: Config.MaxPayloadSize %d must be >= 1 and <= MaxReassemblyBytes %d", c.MaxPayloadSize, c.MaxReassemblyBytes)
	}
	return nil
}

// Errors returned by commands and carried by EventClosed.
var (
	// ErrClosed: the connection is closed; the command did nothing. The
	// rsocket package's ErrClosed is this same value: a request made in
	// the instant the machine closed but its driver had not yet seen it
	// fails with the error a caller of the driver tests for.
	ErrClosed = errors.New("rsocket: connection closed")
	// ErrNotReady: a client command before Start, or any request on a
	// server before SETUP was accepted.
	ErrNotReady = errors.New("rsocket/conn: connection not established")
	// ErrUnknownStream: no live stream with that id (never opened, or
	// already terminated).
	ErrUnknownStream = errors.New("rsocket/conn: unknown stream")
	// ErrNotAllowed: the command is not allowed on this stream in its
	// state: sending on a half that is closed, REQUEST_N on a
	// request-response, CANCEL by a responder of a stream, ...
	ErrNotAllowed = errors.New("rsocket/conn: not allowed on this stream")
	// ErrNoCredits: the peer has not granted credit for another PAYLOAD.
	ErrNoCredits = errors.New("rsocket/conn: no REQUEST_N credits")
	// ErrTooManyStreams: Config.MaxStreams streams are alive.
	ErrTooManyStreams = errors.New("rsocket/conn: too many streams")
	// ErrStreamIDsExhausted: all 2^30 stream ids of this end were used;
	// ids are never reused, so a new connection is needed.
	ErrStreamIDsExhausted = errors.New("rsocket/conn: stream ids exhausted")
	// ErrDraining: the peer sent ERROR[CONNECTION_CLOSE]; no new requests.
	ErrDraining = errors.New("rsocket/conn: connection draining")
	// ErrKeepaliveTimeout: nothing was received for the max lifetime.
	ErrKeepaliveTimeout = errors.New("rsocket/conn: no frame received within the max lifetime")
	// ErrProtocol: the peer broke the protocol (a malformed frame, a
	// frame other than SETUP first, reassembly beyond the limits).
	ErrProtocol = errors.New("rsocket/conn: protocol error")
	// ErrInvalidArgument: a command argument out of range (request N of 0).
	ErrInvalidArgument = errors.New("rsocket/conn: invalid argument")
)

// PeerError is an ERROR frame received on stream 0: the peer closed the
// connection (or refused SETUP).
type PeerError struct {
	Code    frame.ErrorCode
	Message string
}

func (e *PeerError) Error() string {
	return "rsocket/conn: peer closed the connection: " + e.Code.String() + ": " + e.Message
}

// LocalError is the reason this end closed the connection: the ERROR it
// sent on stream 0, and the cause.
type LocalError struct {
	Code    frame.ErrorCode
	Message string
	Err     error // ErrProtocol, ErrKeepaliveTimeout, ... or nil after Close
}

func (e *LocalError) Error() string {
	return "rsocket/conn: closed: " + e.Code.String() + ": " + e.Message
}

func (e *LocalError) Unwrap() error { return e.Err }
