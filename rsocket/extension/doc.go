// Package extension encodes and decodes the metadata formats of the RSocket
// extensions (github.com/rsocket/rsocket, Extensions/), without allocating.
// The formats:
//
//   - composite metadata, message/x.rsocket.composite-metadata.v0: a list
//     of (MIME type, metadata) entries, the type given by a well-known id
//     (MIMEType, the 0x00-0x2A and 0x7A-0x7F table) or as a string;
//   - routing, message/x.rsocket.routing.v0: a list of tags;
//   - authentication, message/x.rsocket.authentication.v0: simple
//     (username, password), bearer (token) or a custom type.
//
// Decoders are iterators (Composite, Routing) or views (ParseAuth) whose
// slices point into the metadata they read: no copy, no allocation, valid
// while that buffer is. Malformed input gives a *MalformedError (wrapping
// ErrMalformed), never a panic; entries before the bad one stay usable.
// Encoders append to a caller's buffer, like package frame's.
//
// Where the spec and the implementations disagree we follow rsocket-java,
// the reference peer: custom MIME and auth type strings are written with
// their length minus one in the 7-bit field (so 1..128 bytes), and must be
// US-ASCII. See the comments on Entry and Auth.
//
// These formats go in the metadata of frames built with package
// github.com/sluicehq/sluice/rsocket/frame; SETUP announces composite
// metadata with MetadataMIME = CompositeMetadataMIME.
package extension
