package firstmsg_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice/internal/transport/grpctransport/firstmsg"
)

const (
	counted   = "/firstmsg.T/Counted"
	uncounted = "/firstmsg.T/Free"
)

// server serves two bidi methods whose handlers say when they start and
// when their first receive returned, then wait for the stream's end.
type server struct {
	started, received chan struct{}
}

func (s *server) handle(_ any, ss grpc.ServerStream) error {
	s.started <- struct{}{}
	var m emptypb.Empty
	if err := ss.RecvMsg(&m); err != nil {
		return err
	}
	s.received <- struct{}{}
	for ss.RecvMsg(&m) == nil {
	}
	return nil
}

func start(t *testing.T, l *firstmsg.Limit) (*server, *grpc.ClientConn) {
	t.Helper()
	s := &server{started: make(chan struct{}, 64), received: make(chan struct{}, 64)}
	desc := grpc.ServiceDesc{ServiceName: "firstmsg.T", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{
		{StreamName: "Counted", Handler: s.handle, ServerStreams: true, ClientStreams: true},
		{StreamName: "Free", Handler: s.handle, ServerStreams: true, ClientStreams: true}}}
	srv := grpc.NewServer(l.ServerOptions()...)
	srv.RegisterService(&desc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return s, cc
}

func open(t *testing.T, ctx context.Context, cc *grpc.ClientConn, method string) grpc.ClientStream {
	t.Helper()
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLimit: a connection may have Max streams of a counted method
// waiting for their first message; the next is refused with
// ResourceExhausted before any handler runs; a first message, or a
// stream's end, frees a place; other methods are not counted.
func TestLimit(t *testing.T) {
	var refused atomic.Int64
	l := firstmsg.New(firstmsg.Config{Max: 4, Methods: []string{counted}, Refused: func() { refused.Add(1) }})
	s, cc := start(t, l)
	ctx := t.Context()
	var waiting []grpc.ClientStream
	for range 4 {
		waiting = append(waiting, open(t, ctx, cc, counted))
		<-s.started
	}
	// Streams of another method are not counted.
	for range 8 {
		open(t, ctx, cc, uncounted)
		<-s.started
	}
	over := open(t, ctx, cc, counted)
	var m emptypb.Empty
	if err := over.RecvMsg(&m); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("fifth waiting stream: %v, want ResourceExhausted", err)
	}
	if refused.Load() != 1 {
		t.Fatalf("Refused called %d times, want 1", refused.Load())
	}
	select {
	case <-s.started:
		t.Fatal("a handler ran for the refused stream")
	default:
	}

	// A first message frees a place.
	if err := waiting[0].SendMsg(&m); err != nil {
		t.Fatal(err)
	}
	<-s.received
	open(t, ctx, cc, counted)
	<-s.started

	// So does a stream that ends without one.
	if err := waiting[1].CloseSend(); err != nil {
		t.Fatal(err)
	}
	// waiting[1]'s handler sees the end of its stream and returns: its
	// place is free once the server answered its end.
	if err := waiting[1].RecvMsg(&m); err == nil {
		t.Fatal("want the stream's end")
	}
	open(t, ctx, cc, counted)
	<-s.started
}
