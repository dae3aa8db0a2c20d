package sink

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/auth"
)

// authEnabled reports whether the sink knows who its clients are: tokens,
// or mutual TLS (a client certificate binds an identity, see
// auth.CertIdentity). Without either, anyone reaching the port may send as
// any agent and read everything.
func (s *Sink) authEnabled() bool { return s.cfg.Tokens != nil || auth.MutualTLS(s.cfg.TLS) }

// checkSend returns nil if the caller may open a Send stream as agent,
// else a status error (logged). Every mechanism configured must agree:
// the token's agent id and the certificate's. Without this, any holder of
// a valid certificate could send as another agent, and the dedup index
// would then drop that agent's later messages as duplicates.
func (s *Sink) checkSend(ctx context.Context, agent, peerAddr string) error {
	if s.cfg.Tokens != nil {
		id, ok := auth.FromContext(ctx)
		if !ok {
			return status.Error(codes.Unauthenticated, "no authenticated identity")
		}
		if !id.CanSend(agent) {
			s.log.Warn("sink: token not valid for agent; stream refused", "agent_id", agent, "token_agent_id", id.AgentID, "peer", peerAddr)
			return status.Errorf(codes.PermissionDenied, "this token may not send as agent %q", agent)
		}
	}
	if auth.MutualTLS(s.cfg.TLS) {
		id, err := auth.PeerIdentity(ctx)
		if err != nil {
			s.log.Warn("sink: client certificate names no identity; stream refused", "agent_id", agent, "peer", peerAddr, "err", err)
			return status.Errorf(codes.PermissionDenied, "client certificate: %v", err)
		}
		if !id.CanSend(agent) {
			s.log.Warn("sink: client certificate not valid for agent; stream refused", "agent_id", agent,
				"certificate_identity", id.AgentID, "peer", peerAddr)
			return status.Errorf(codes.PermissionDenied, "this client certificate (identity %q) may not send as agent %q", id.AgentID, agent)
		}
	}
	return nil
}

// checkRead returns nil if the caller may read the store, else a status
// error (logged): with tokens, a consumer ("*") token; with mutual TLS, a
// reader certificate (auth.CertIdentity). Agents may not read: an agent's
// credentials on a compromised host must not expose every agent's data.
func (s *Sink) checkRead(ctx context.Context, peerAddr string) error {
	if s.cfg.Tokens != nil {
		id, ok := auth.FromContext(ctx)
		if !ok {
			return status.Error(codes.Unauthenticated, "no authenticated identity")
		}
		if !id.CanRead() {
			s.log.Warn("sink: token may not read; stream refused", "token_agent_id", id.AgentID, "peer", peerAddr)
			return status.Error(codes.PermissionDenied, "this token may not read: reading needs a consumer (\"*\") token")
		}
	}
	if auth.MutualTLS(s.cfg.TLS) {
		id, err := auth.PeerIdentity(ctx)
		if err != nil {
			s.log.Warn("sink: client certificate names no identity; read refused", "peer", peerAddr, "err", err)
			return status.Errorf(codes.PermissionDenied, "client certificate: %v", err)
		}
		if !id.CanRead() {
			s.log.Warn("sink: client certificate may not read; stream refused", "certificate_identity", id.AgentID, "peer", peerAddr)
			return status.Errorf(codes.PermissionDenied,
				"this client certificate (identity %q) may not read: reading needs a reader certificate (URI spiffe://TRUST-DOMAIN/reader, or Common Name %q)",
				id.AgentID, auth.ReaderCN)
		}
	}
	return nil
}

// peerAddr returns the address of the caller, for logs.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
