package protocol

import (
	"context"
	"crypto/tls"
)

// Conn is one session over some transport: a Send session (agent ↔ sink)
// or a Read session (consumer ↔ sink), seen from either end.
//
// Send may be called from one goroutine at a time and Recv from one other;
// they may run concurrently. Send may reuse nothing of f after it returns:
// the transport has encoded or copied what it needs. A frame returned by
// Recv is the caller's until the next Recv; its byte slices may alias a
// transport buffer that the next Recv reuses.
//
// Errors: Recv returns io.EOF when the peer closed its sending side
// cleanly, a *SessionError when the peer (or the transport) ended the
// session with a status, anything else for a broken connection.
//
// A Send that finds the session ended returns its status too, and on
// transports where only a receive sees that status (gRPC), Send gets it
// from the goroutine that calls Recv: once Recv has been called, Send may
// wait, until Close, for Recv to be called again and see the end. So the
// reader of a session keeps calling Recv until it returns an error, or
// Closes the session, as every reader here does.
type Conn interface {
	Send(f Frame) error
	Recv() (Frame, error)
	// CloseSend ends this side's frames; the peer's Recv sees io.EOF.
	CloseSend() error
	// Close ends the session with err (nil: normally); the peer sees
	// err's Status. It is idempotent and unblocks Send and Recv.
	Close(err error)
	// Context is done when the session has ended.
	Context() context.Context
	// Peer describes the other end.
	Peer() PeerInfo
}

// PeerInfo is what the transport knows about the other end: its address,
// its TLS state (the client certificate binds its identity) and the bearer
// token it presented, if any.
type PeerInfo struct {
	Addr  string
	TLS   *tls.ConnectionState
	Token string
	// Local is this end's address of the connection, when the transport
	// knows it: with Addr, it names the connection (the sink's
	// per-address limit finds a session's connection by it).
	Local string
}

// Dialer opens sessions to a sink: Send for an agent, Read for a consumer.
type Dialer interface {
	Send(ctx context.Context) (Conn, error)
	Read(ctx context.Context) (Conn, error)
}

// Service is what a sink offers; a transport's server calls it for each
// session it accepts, and the session ends when the call returns (with the
// returned error's Status).
type Service interface {
	ServeSend(c Conn) error
	ServeRead(c Conn) error
}

// PayloadOwner is implemented by a Conn whose Recv hands over what it
// returns: nothing of a returned frame (a Message's payload) is reused by a
// later Recv, so a receiver may keep it without copying. A receiver that
// keeps payloads past the next Recv (the sink, until they are stored)
// copies them when its Conn does not say so.
type PayloadOwner interface {
	PayloadsOwned() bool
}
