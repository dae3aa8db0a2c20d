// Package auth secures the sink and its clients, whatever the transport:
// TLS (with optional mutual TLS) for the connection, and bearer tokens for
// identity. It knows no gRPC: internal/transport/grpctransport carries
// tokens over gRPC (its interceptors and Bearer), rsockettransport over
// RSocket.
//
// # Server side
//
// ServerTLS loads the sink's certificate and key and, given a client CA
// bundle, requires and verifies a client certificate on every connection
// (tls.RequireAndVerifyClientCert): a client without one fails the TLS
// handshake before any RPC.
//
// A tokens file maps bearer tokens to identities, one per line:
//
//	# comment lines start with '#'; blank lines are ignored
//	TOKEN   AGENT_ID
//	TOKEN2  *
//
// A token whose agent id is "*" is a consumer token: it may call Sink.Read
// and never Sink.Send. Any other token is an agent token: it may call
// Sink.Send with Hello.agent_id equal to its agent id, and nothing else.
// Tokens and agent ids are whitespace-free; a token must be at least
// MinTokenLen bytes, an agent id at most 255.
//
// Over gRPC, grpctransport.TokenStreamInterceptor (and
// TokenUnaryInterceptor) require the metadata "authorization: Bearer
// TOKEN" on every call, fail it with codes.Unauthenticated when the header
// is missing, malformed or names an unknown token (Tokens.Lookup), and
// otherwise put the Identity in the call's context (NewContext,
// FromContext). Which identity may do what is checked by the service
// (codes.PermissionDenied), since only it knows the agent id of a stream.
// Tokens are compared through their SHA-256 digests, so a lookup's timing
// reveals nothing about how much of a guess was right.
//
// # Identity from client certificates
//
// With mutual TLS (MutualTLS: a client CA configured, certificates required
// and verified) the client certificate also says who the client is, so
// that a certificate cannot be used to pose as another agent
// (CertIdentity):
//
//   - URI SAN spiffe://TRUST-DOMAIN/agent/ID: agent ID;
//   - URI SAN spiffe://TRUST-DOMAIN/reader: a reader (consumer);
//   - no spiffe:// URI SAN: the subject Common Name is the agent id, and
//     the Common Name "reader" (ReaderCN) is a reader.
//
// A certificate with two spiffe:// URIs, or one of another shape, names
// no identity and is refused. The sink lets a Send stream use only the
// agent id of its certificate (and of its token, when tokens are also
// configured: every configured mechanism must agree), and lets only
// readers call Read. The trust domain is not checked: the client CA is
// what decides whom to trust.
//
// # Client side
//
// ClientTLS builds the client's TLS configuration (CA bundle, optional
// client certificate for mTLS, server name); over gRPC,
// grpctransport.Bearer is the credentials.PerRPCCredentials that sends the
// token. A Bearer refuses,
// through gRPC's RequireTransportSecurity, to travel over a connection
// without TLS unless it was created with allowInsecure — the
// --insecure-token flag of the CLI — which is meant for loopback tests
// only: without TLS anyone on the path reads the token.
package auth
