package grpctransport_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// These tests were internal/auth's until the gRPC side of tokens (the
// interceptors, Bearer) moved here.

const (
	agentToken  = "agent-token-0123456789"
	readerToken = "reader-token-0123456789"
)

// echoSink answers Read with the caller's identity as the agent id of one
// StoredMessage.
type echoSink struct {
	sluicev1.UnimplementedSinkServer
}

func (echoSink) Read(stream grpc.BidiStreamingServer[sluicev1.ReadRequest, sluicev1.ReadResponse]) error {
	id, ok := auth.FromContext(stream.Context())
	if !ok {
		return status.Error(codes.Internal, "no identity in context")
	}
	return stream.Send(&sluicev1.ReadResponse{Body: &sluicev1.ReadResponse_Message{Message: &sluicev1.StoredMessage{AgentId: id.AgentID}}})
}

// serve starts echoSink with the given server options and returns its
// address.
func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	sluicev1.RegisterSinkServer(srv, echoSink{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// call opens a Read stream and returns the identity the server saw.
func call(t *testing.T, addr string, opts ...grpc.DialOption) (string, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return "", err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a bound, not an expectation
	defer cancel()
	stream, err := sluicev1.NewSinkClient(cc).Read(ctx)
	if err != nil {
		return "", err
	}
	resp, err := stream.Recv()
	if err != nil {
		return "", err
	}
	return resp.GetMessage().GetAgentId(), nil
}

func testTokens(t *testing.T) *auth.Tokens {
	tok, err := auth.ParseTokens(strings.NewReader(agentToken + " edge-1\n" + readerToken + " *\n"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenInterceptor(t *testing.T) {
	addr := serve(t, grpc.StreamInterceptor(grpctransport.TokenStreamInterceptor(testTokens(t))))
	plain := grpc.WithTransportCredentials(insecure.NewCredentials())
	tests := []struct {
		name  string
		opts  []grpc.DialOption
		want  string
		code  codes.Code
		match string
	}{
		{"agent token", []grpc.DialOption{plain, grpc.WithPerRPCCredentials(grpctransport.NewBearer(agentToken, true))}, "edge-1", codes.OK, ""},
		{"reader token", []grpc.DialOption{plain, grpc.WithPerRPCCredentials(grpctransport.NewBearer(readerToken, true))}, "*", codes.OK, ""},
		{"invalid token", []grpc.DialOption{plain, grpc.WithPerRPCCredentials(grpctransport.NewBearer("wrong-token-0123456789", true))}, "", codes.Unauthenticated, "unknown token"},
		{"missing token", []grpc.DialOption{plain}, "", codes.Unauthenticated, "missing authorization"},
		{"malformed header", []grpc.DialOption{plain, grpc.WithPerRPCCredentials(rawAuth("Basic abc"))}, "", codes.Unauthenticated, "malformed"},
		// Without allowInsecure gRPC itself refuses to send the token in
		// clear text: the client cannot even be created.
		{"token needs TLS", []grpc.DialOption{plain, grpc.WithPerRPCCredentials(grpctransport.NewBearer(agentToken, false))}, "", codes.Unknown, "require transport level security"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(t, addr, tt.opts...)
			if status.Code(err) != tt.code || (tt.match != "" && !strings.Contains(err.Error(), tt.match)) {
				t.Fatalf("call error = %v, want code %v matching %q", err, tt.code, tt.match)
			}
			if got != tt.want {
				t.Fatalf("server saw identity %q, want %q", got, tt.want)
			}
		})
	}
}

type rawAuth string

func (r rawAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": string(r)}, nil
}
func (rawAuth) RequireTransportSecurity() bool { return false }

func TestTLSAndToken(t *testing.T) {
	p := testpki.WriteFiles(t)
	srvTLS, err := auth.ServerTLS(p.ServerCert, p.ServerKey, "")
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, grpc.Creds(credentials.NewTLS(srvTLS)), grpc.StreamInterceptor(grpctransport.TokenStreamInterceptor(testTokens(t))))
	cliTLS, err := auth.ClientTLS(p.CA, "", "", "sink.test")
	if err != nil {
		t.Fatal(err)
	}
	// Over TLS the token may require transport security.
	got, err := call(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(cliTLS)),
		grpc.WithPerRPCCredentials(grpctransport.NewBearer(agentToken, false)))
	if err != nil || got != "edge-1" {
		t.Fatalf("call = %q, %v; want edge-1", got, err)
	}
	// A client that does not trust the CA fails the handshake.
	untrusted, err := auth.ClientTLS("", "", "", "sink.test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(untrusted))); status.Code(err) != codes.Unavailable {
		t.Fatalf("untrusting client: %v, want Unavailable", err)
	}
}

func TestMutualTLS(t *testing.T) {
	p := testpki.WriteFiles(t)
	srvTLS, err := auth.ServerTLS(p.ServerCert, p.ServerKey, p.CA)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, grpc.Creds(credentials.NewTLS(srvTLS)), grpc.StreamInterceptor(grpctransport.TokenStreamInterceptor(testTokens(t))))
	bearer := grpc.WithPerRPCCredentials(grpctransport.NewBearer(readerToken, false))

	withCert, err := auth.ClientTLS(p.CA, p.ClientCert, p.ClientKey, "sink.test")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := call(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(withCert)), bearer); err != nil || got != "*" {
		t.Fatalf("with client certificate: %q, %v", got, err)
	}

	noCert, err := auth.ClientTLS(p.CA, "", "", "sink.test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(noCert)), bearer)
	if err == nil {
		t.Fatal("a client without a certificate got through mutual TLS")
	}
	if c := status.Code(err); c != codes.Unavailable {
		t.Fatalf("without client certificate: %v, want Unavailable (handshake failure)", err)
	}
}
