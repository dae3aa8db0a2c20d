// Package rsockettransport carries sluice's delivery protocol (internal/protocol)
// over RSocket (the public rsocket package), as a second transport beside
// gRPC: an agent dials tcp://HOST:PORT or ws://HOST:PORT/PATH with
// NewDialer, a sink serves a protocol.Service with Serve, ServeWebSocket
// or ServeURL.
//
// Sessions. A Send session (agent ↔ sink) and a Read session (consumer ↔
// sink) are each one REQUEST_CHANNEL: the requester's frames are the
// channel's payloads, the responder's frames its responses, and both
// directions are open for the session's whole life, as a gRPC bidi stream
// is. A Read session could be a REQUEST_STREAM with ReadMore as REQUEST_N,
// but Commit must travel upstream mid-stream, which only a channel allows;
// one shape for both sessions keeps one code path. The channel's first
// payload carries no protocol frame: its metadata is the session kind
// ('S' or 'R') followed by the bearer token in the RSocket authentication
// extension's encoding (well-known type "bearer"). Opening thus fails
// fast when the sink is down, and the protocol's first frame (Hello,
// ReadStart) is an ordinary payload.
//
// Flow control. Each end grants the other Window (1024) REQUEST_N credits,
// topped up as frames are consumed. That is a backstop, not the window:
// the protocol's own credits (Welcome and Credit, in messages and bytes)
// bound what an agent has unacknowledged, well below 1024 frames, so
// REQUEST_N never holds back a frame the protocol allows; it only bounds
// what piles up at a receiver that stopped reading. Mapping the protocol
// credits onto REQUEST_N would lose their byte dimension and duplicate
// the Sender's window logic in the transport.
//
// Frames. Each frame is encoded by this package's codec (codec.go): the
// header (a type byte, then the fields as uvarints, bytes and
// length-prefixed strings) is the payload's metadata, and the bulk bytes
// of a Message or Dictionary are the payload's data, referenced when
// sending and aliased when receiving, so the transport adds no copy of a
// batch. SETUP declares metadata MIME application/x.sluice.frame.v1.
//
// Statuses. A session that ends with a protocol.Status ends its channel
// with ERROR[0x301+Status] (the application range of Protocol.md's error
// codes) and the SessionError's message as the ERROR's data, so
// PermissionDenied stays permanent and Unavailable retryable on the
// other end. The spec's own codes map to the nearest status (CANCELED →
// Canceled, INVALID → Invalid, REJECTED → Unavailable,
// APPLICATION_ERROR → Internal), and a connection that closed or broke
// fails its sessions with Unavailable, which is retryable.
//
// Identity. The sink's PeerInfo has the connection's remote address, its
// TLS state with the client certificate (WithTLS on both ends; the
// handshake completes before RSocket starts) and the bearer token of the
// session's opening metadata. The token travels per session rather than
// in SETUP because the rsocket package's Responder does not see SETUP
// metadata; per session it is also what gRPC's per-RPC credentials do.
//
// Connections. A Dialer keeps one RSocket connection, shared by every
// session it opens (sessions are streams, so many sessions cost no more
// connections), and dials again when it died; a session whose connection
// dies fails its Recv with a retryable error and its Context ends.
package rsockettransport
