package sink

import (
	"context"
	"errors"
	"strings"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/protocol"
)

// tokenIdentity is the identity of the session's bearer token: the one
// the transport's authentication put in ctx (the gRPC interceptor, which
// also refused unknown tokens), else the token the transport reports.
func (s *Sink) tokenIdentity(ctx context.Context, peer protocol.PeerInfo) (auth.Identity, bool) {
	if id, ok := auth.FromContext(ctx); ok {
		return id, true
	}
	if peer.Token != "" {
		return s.cfg.Tokens.Lookup(peer.Token)
	}
	return auth.Identity{}, false
}

// certIdentity is the identity of the peer's verified client certificate.
func certIdentity(peer protocol.PeerInfo) (auth.Identity, error) {
	if peer.TLS == nil {
		return auth.Identity{}, errors.New("connection is not TLS")
	}
	chains := peer.TLS.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return auth.Identity{}, errors.New("no verified client certificate")
	}
	return auth.CertIdentity(chains[0][0])
}

// checkSend returns the credentials that vouched for the peer ("token",
// "certificate" or both; "" without authentication) if it may open a
// Send session as agent, else a session error (logged). Every mechanism configured must agree:
// the token's agent id and the certificate's. Without this, any holder of
// a valid certificate could send as another agent, and the dedup index
// would then drop that agent's later messages as duplicates.
func (s *Sink) checkSend(ctx context.Context, peer protocol.PeerInfo, agent string) (vouched string, err error) {
	var by []string
	if s.cfg.Tokens != nil {
		id, ok := s.tokenIdentity(ctx, peer)
		if !ok {
			return "", protocol.Errorf(protocol.StatusUnauthenticated, "no authenticated identity")
		}
		if !id.CanSend(agent) {
			s.log.Warn("sink: token not valid for agent; stream refused", "agent_id", agent, "token_agent_id", id.AgentID, "peer", peer.Addr)
			return "", protocol.Errorf(protocol.StatusPermissionDenied, "this token may not send as agent %q", agent)
		}
		by = append(by, "token")
	}
	if auth.MutualTLS(s.cfg.TLS) {
		id, err := certIdentity(peer)
		if err != nil {
			s.log.Warn("sink: client certificate names no identity; stream refused", "agent_id", agent, "peer", peer.Addr, "err", err)
			return "", protocol.Errorf(protocol.StatusPermissionDenied, "client certificate: %v", err)
		}
		if !id.CanSend(agent) {
			s.log.Warn("sink: client certificate not valid for agent; stream refused", "agent_id", agent,
				"certificate_identity", id.AgentID, "peer", peer.Addr)
			return "", protocol.Errorf(protocol.StatusPermissionDenied, "this client certificate (identity %q) may not send as agent %q", id.AgentID, agent)
		}
		by = append(by, "certificate")
	}
	return strings.Join(by, "+"), nil
}

// checkRead returns nil if the peer may read the store, else a session
// error (logged): with tokens, a consumer ("*") token; with mutual TLS, a
// reader certificate (auth.CertIdentity). Agents may not read: an agent's
// credentials on a compromised host must not expose every agent's data.
func (s *Sink) checkRead(ctx context.Context, peer protocol.PeerInfo) error {
	if s.cfg.Tokens != nil {
		id, ok := s.tokenIdentity(ctx, peer)
		if !ok {
			return protocol.Errorf(protocol.StatusUnauthenticated, "no authenticated identity")
		}
		if !id.CanRead() {
			s.log.Warn("sink: token may not read; stream refused", "token_agent_id", id.AgentID, "peer", peer.Addr)
			return protocol.Errorf(protocol.StatusPermissionDenied, "this token may not read: reading needs a consumer (\"*\") token")
		}
	}
	if auth.MutualTLS(s.cfg.TLS) {
		id, err := certIdentity(peer)
		if err != nil {
			s.log.Warn("sink: client certificate names no identity; read refused", "peer", peer.Addr, "err", err)
			return protocol.Errorf(protocol.StatusPermissionDenied, "client certificate: %v", err)
		}
		if !id.CanRead() {
			s.log.Warn("sink: client certificate may not read; stream refused", "certificate_identity", id.AgentID, "peer", peer.Addr)
			return protocol.Errorf(protocol.StatusPermissionDenied,
				"this client certificate (identity %q) may not read: reading needs a reader certificate (URI spiffe://TRUST-DOMAIN/reader, or Common Name %q)",
				id.AgentID, auth.ReaderCN)
		}
	}
	return nil
}
