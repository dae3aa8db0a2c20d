// Package frame encodes and decodes the frames of RSocket Protocol 1.0
// (github.com/rsocket/rsocket, Protocol.md), without allocating.
//
// It is the lowest layer of sluice's RSocket implementation: it knows the
// byte layout of every frame type and the rules that can be checked on one
// frame alone. Streams, credits, leases, keepalive timers, fragmentation and
// resumption belong to the connection state machine above it; this package
// gives that machine what it needs to decide (typed views, the kind of each
// error, sizes, which frames count toward resume positions) and decides
// nothing itself.
//
// # Decoding
//
// A frame is a []byte without its transport length prefix. ParseHeader reads
// the stream id, type and flags; the Parse function of the type
// (ParseRequestStream, ParsePayload, ...) returns a read-only view, a small
// struct whose Metadata, Data, token and MIME fields are slices into the
// frame. Nothing is copied, so parsing does not allocate, and a view is
// valid only while its frame buffer is not reused (the rule of x/net/http2's
// Framer with SetReuseFrames). Validate parses any frame and keeps only the
// verdict.
//
// Decoding is strict and total: every input, however short, long or
// corrupt, yields a view or a *DecodeError, never a panic (fuzzed). A
// DecodeError carries the spec's answer:
//
//   - KindConnection: malformed (truncated, metadata length beyond the
//     frame, keepalive interval 0, a SETUP on a stream other than 0, an
//     unknown frame type without the I flag...). Send ERROR[Code] on stream
//     0 (INVALID_SETUP for SETUP, CONNECTION_ERROR otherwise) and close.
//   - KindStream: a well-formed frame with a field invalid for its stream
//     (request N of 0 or >= 2^31, a PAYLOAD with none of N, C, F). Answer
//     ERROR[INVALID] on that stream.
//   - KindIgnore: the spec says to ignore it: an unknown type or a
//     malformed frame with the I flag set, METADATA_PUSH, LEASE, KEEPALIVE
//     or RESUME_OK on a stream other than 0, a stream frame on stream 0.
//
// The cause is one of the Err* sentinels (errors.Is). Unknown flag bits are
// kept in Header.Flags and otherwise not interpreted, as the spec requires.
//
// # Encoding
//
// AppendSetup, AppendPayload, ... append one frame to a caller's buffer and
// return it, growing it at most once; with enough capacity they do not
// allocate. They refuse what a conforming sender must not send (a frame over
// MaxFrameSize, request N of 0, a stream frame on stream 0) with an error
// rather than write a frame the peer would reject. The M flag follows the
// metadata argument: nil means none, non-nil (even empty) means present.
//
// # Transport framing
//
// TCP puts a 24-bit length before each frame; WebSocket does not. The
// prefix is handled apart from the codec: AppendLengthPrefix, or
// ReserveLengthPrefix and SetLengthPrefix around an Append call, to write;
// ReadLengthPrefixed to read into a reusable buffer, rejecting oversize
// frames before reading their body.
//
// # Sizes for fragmentation and resume
//
// FixedSize, Size and MaxFragmentPayload give the bytes each type takes
// before its payload, so a fragmenter can cut metadata and data to fit
// MaxFrameSize (16,777,215 bytes) or a smaller limit. IsResumable says which
// frames count toward the resume positions: every frame on a stream other
// than 0 (rsocket-java's rule; the spec's list of REQUEST_*, REQUEST_N,
// CANCEL, ERROR and PAYLOAD differs only for EXT frames on a stream, which
// count), counted as Size bytes.
//
// # Where peers deviate
//
// Decisions taken where the spec is loose, each chosen to interoperate with
// rsocket-java 1.1 (the reference) while staying within the spec:
//
//   - LEASE TTL and count of 0 are accepted (the spec both requires > 0 and
//     allows 0 to stop requests).
//   - METADATA_PUSH without the M flag is accepted; we always send M.
//   - EXT bodies are split into metadata (with length, if M) and data, as
//     rsocket-java writes them.
//   - The reserved top bit of the stream id is dropped on reading.
//   - Trailing bytes after a fixed-size frame (REQUEST_N, CANCEL, RESUME,
//     RESUME_OK, LEASE without M) are malformed: no sender writes them, so
//     they mean the framing is off.
//
// Package github.com/sluicehq/sluice/rsocket/extension decodes the metadata
// formats of the RSocket extensions (composite metadata, routing,
// authentication) with the same zero-allocation approach.
package frame
