package grpctransport

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/auth"
)

// Bearer tokens over gRPC: the "authorization: Bearer TOKEN" metadata a
// client sends (Bearer) and the interceptors that check it against an
// auth.Tokens on the server. internal/auth holds the tokens and
// identities, free of any transport.

// Authenticate checks the bearer token in ctx's incoming metadata against
// t and returns ctx carrying the identity (auth.FromContext), or a
// codes.Unauthenticated status.
func Authenticate(t *auth.Tokens, ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, status.Error(codes.Unauthenticated, "missing authorization metadata: send \"authorization: Bearer TOKEN\"")
	}
	if len(vals) > 1 {
		return nil, status.Error(codes.Unauthenticated, "more than one authorization header")
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return nil, status.Error(codes.Unauthenticated, "malformed authorization metadata: want \"Bearer TOKEN\"")
	}
	id, ok := t.Lookup(strings.TrimSpace(token))
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return auth.NewContext(ctx, id), nil
}

// TokenStreamInterceptor authenticates every streaming call with t (see
// Authenticate).
func TokenStreamInterceptor(t *auth.Tokens) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := Authenticate(t, ss.Context())
		if err != nil {
			return err
		}
		return handler(srv, &identityStream{ServerStream: ss, ctx: ctx})
	}
}

// TokenUnaryInterceptor authenticates every unary call with t (see
// Authenticate).
func TokenUnaryInterceptor(t *auth.Tokens) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := Authenticate(t, ctx)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// identityStream is a ServerStream whose context carries the identity.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// Bearer is a credentials.PerRPCCredentials sending "authorization: Bearer
// TOKEN" with every call.
type Bearer struct {
	token         string
	allowInsecure bool
}

// NewBearer returns credentials sending token. Unless allowInsecure is set,
// gRPC refuses to send them over a connection without TLS (see internal/auth's package
// documentation: allowInsecure is for loopback tests only).
func NewBearer(token string, allowInsecure bool) Bearer {
	return Bearer{token: token, allowInsecure: allowInsecure}
}

var _ credentials.PerRPCCredentials = Bearer{}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: true
// unless the Bearer was made with allowInsecure.
func (b Bearer) RequireTransportSecurity() bool { return !b.allowInsecure }
