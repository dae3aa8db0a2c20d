package grpctransport_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/conntest"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// dial serves svc over gRPC on loopback and returns a Dialer to it.
func dial(t *testing.T, svc protocol.Service) *grpctransport.Dialer {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	grpctransport.Register(s, svc)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return grpctransport.NewDialer(cc)
}

// TestConformance runs the protocol.Conn suite over gRPC.
func TestConformance(t *testing.T) {
	conntest.Run(t, func(t *testing.T, svc protocol.Service) protocol.Dialer { return dial(t, svc) })
}
