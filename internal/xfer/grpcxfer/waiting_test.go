package grpcxfer_test

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	xferv1 "github.com/sluicehq/sluice/api/xfer/v1"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/firstmsg"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/grpcxfer"
)

// TestWaitingUploadsPerConnection (issue 23): a connection may have
// firstmsg.DefaultMax Uploads open without their Begin; the next is
// refused with ResourceExhausted, before a handler runs; once one of
// them has sent its Begin (and ended), a new Upload is served. Before,
// each such Upload ran a handler, 256 per connection: a client opening
// them and sending nothing from 100 connections had `xfer serve` run
// 25,600 goroutines.
func TestWaitingUploadsPerConnection(t *testing.T) {
	st, err := diskstore.Open(t.TempDir(), diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	addr := serveT(t, st)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := xferv1.NewXferClient(cc)
	ctx := t.Context()
	// The server counts each stream in when it reads its HEADERS, in the
	// order the client opened them: the silent ones before the next.
	var silent []xferv1.Xfer_UploadClient
	for range firstmsg.DefaultMax {
		u, err := c.Upload(ctx)
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, u)
	}
	over, err := c.Upload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := over.CloseAndRecv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Upload beyond the waiting ones: %v, want ResourceExhausted", err)
	}
	// A Begin frees a place: the upload then ends incomplete.
	begin := &xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Begin{Begin: &xferv1.Begin{Name: "a.bin", Size: 10}}}
	if err := silent[0].Send(begin); err != nil {
		t.Fatal(err)
	}
	if _, err := silent[0].CloseAndRecv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Begin then end: %v, want FailedPrecondition (incomplete)", err)
	}
	next, err := c.Upload(ctx)
	if err != nil {
		t.Fatal(err)
	}
	begin.GetBegin().Name = "b.bin"
	if err := next.Send(begin); err != nil {
		t.Fatal(err)
	}
	if _, err := next.CloseAndRecv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("an Upload once a place is free: %v, want FailedPrecondition (incomplete)", err)
	}
}

// serveT serves st with grpcxfer's server options on a loopback port
// until the test ends, and returns its address.
func serveT(t *testing.T, st xfer.Backend) string {
	t.Helper()
	srv := grpc.NewServer(grpcxfer.ServerOptions(time.Minute, nil)...)
	grpcxfer.Register(srv, st)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}
