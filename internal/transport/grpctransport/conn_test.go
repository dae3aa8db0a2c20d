package grpctransport_test

import (
	"context"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

type svc struct{}

func (svc) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *protocol.Hello:
			if f.AgentID == "bad" {
				return protocol.Errorf(protocol.StatusPermissionDenied, "agent %q", f.AgentID)
			}
			c.Send(&protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 8, Bytes: 1 << 20}, SessionID: "s"})
		case *protocol.Message:
			c.Send(&protocol.Credit{Credits: &protocol.Credits{Messages: 9}})
			c.Send(&protocol.Error{MessageID: f.ID, Code: protocol.CodeOverCredit, Retryable: true})
			c.Send(&protocol.Ack{Ranges: []protocol.IDRange{{First: f.ID, Last: f.ID}}})
		}
	}
}

func (svc) ServeRead(c protocol.Conn) error {
	f, err := c.Recv()
	if err != nil {
		return err
	}
	st := f.(*protocol.ReadStart)
	if st.From > 10 {
		return protocol.Errorf(protocol.StatusOutOfRange, "offset %d", st.From)
	}
	c.Send(&protocol.Stored{Offset: st.From, AgentID: "a", MessageID: 1, Records: [][]byte{[]byte("r")}})
	return c.Send(&protocol.EndOfLog{Next: st.From + 1})
}

func dial(t *testing.T) *grpctransport.Dialer {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	grpctransport.Register(s, svc{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return grpctransport.NewDialer(cc)
}

func TestSendSession(t *testing.T) {
	d := dial(t)
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(nil)
	c.Send(&protocol.Hello{AgentID: "a", Version: protocol.Version, Codecs: []protocol.Codec{protocol.CodecZstd}})
	f, err := c.Recv()
	if w, ok := f.(*protocol.Welcome); err != nil || !ok || w.Credits.Messages != 8 || w.SessionID != "s" {
		t.Fatalf("welcome: %#v %v", f, err)
	}
	if err := c.Send(&protocol.Message{ID: 7, Records: 1, Codec: protocol.CodecZstd, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for len(names) < 3 {
		f, err := c.Recv()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, protocol.Name(f))
		if e, ok := f.(*protocol.Error); ok && (e.MessageID != 7 || e.Code != protocol.CodeOverCredit || !e.Retryable) {
			t.Fatalf("%+v", e)
		}
	}
	if names[0] != "Credit" || names[1] != "Error" || names[2] != "Ack" {
		t.Fatal(names)
	}
	c.CloseSend()
	if _, err := c.Recv(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestStatusCrossesTheWire(t *testing.T) {
	d := dial(t)
	c, _ := d.Send(context.Background())
	defer c.Close(nil)
	err := c.Send(&protocol.Hello{AgentID: "bad", Version: protocol.Version})
	if err == nil {
		_, err = c.Recv()
	}
	if protocol.StatusOf(err) != protocol.StatusPermissionDenied || protocol.IsRetryable(err) {
		t.Fatalf("got %v (status %v)", err, protocol.StatusOf(err))
	}

	r, _ := d.Read(context.Background())
	r.Send(&protocol.ReadStart{From: 11})
	if _, err := r.Recv(); protocol.StatusOf(err) != protocol.StatusOutOfRange {
		t.Fatalf("read: %v", err)
	}
}

func TestReadSession(t *testing.T) {
	d := dial(t)
	r, _ := d.Read(context.Background())
	r.Send(&protocol.ReadStart{From: 3, Follow: false})
	f, err := r.Recv()
	if s, ok := f.(*protocol.Stored); err != nil || !ok || s.Offset != 3 || string(s.Records[0]) != "r" {
		t.Fatalf("%#v %v", f, err)
	}
	f, err = r.Recv()
	if e, ok := f.(*protocol.EndOfLog); err != nil || !ok || e.Next != 4 {
		t.Fatalf("%#v %v", f, err)
	}
	if _, err := r.Recv(); err != io.EOF {
		t.Fatal(err)
	}
}
