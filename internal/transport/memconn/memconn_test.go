package memconn

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
)

func TestPipeOrderAndEOF(t *testing.T) {
	c, s := Pipe(4, protocol.PeerInfo{Addr: "a"})
	go func() {
		for i := uint64(1); i <= 10; i++ {
			c.Send(&protocol.Message{ID: i, Payload: []byte{byte(i)}})
		}
		c.CloseSend()
	}()
	for i := uint64(1); i <= 10; i++ {
		f, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m := f.(*protocol.Message); m.ID != i || m.Payload[0] != byte(i) {
			t.Fatalf("frame %d: %+v", i, m)
		}
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
	if s.Peer().Addr != "a" {
		t.Fatal(s.Peer())
	}
}

func TestSendCopiesPayload(t *testing.T) {
	c, s := Pipe(4, protocol.PeerInfo{})
	buf := []byte("abc")
	c.Send(&protocol.Message{ID: 1, Payload: buf})
	buf[0] = 'x'
	f, _ := s.Recv()
	if string(f.(*protocol.Message).Payload) != "abc" {
		t.Fatal("the receiver saw the sender's later write")
	}
}

func TestCloseCarriesStatus(t *testing.T) {
	c, s := Pipe(1, protocol.PeerInfo{})
	s.Close(protocol.Errorf(protocol.StatusPermissionDenied, "no"))
	_, err := c.Recv()
	if protocol.StatusOf(err) != protocol.StatusPermissionDenied {
		t.Fatalf("Recv after Close: %v", err)
	}
	if err := c.Send(&protocol.Ack{}); protocol.StatusOf(err) != protocol.StatusPermissionDenied {
		t.Fatalf("Send after Close: %v", err)
	}
}

type echoService struct{}

func (echoService) ServeSend(c protocol.Conn) error {
	for {
		f, err := c.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h, ok := f.(*protocol.Hello); ok && h.AgentID == "bad" {
			return protocol.Errorf(protocol.StatusPermissionDenied, "agent %q", h.AgentID)
		}
		if err := c.Send(&protocol.Welcome{Version: protocol.Version}); err != nil {
			return err
		}
	}
}

func (echoService) ServeRead(c protocol.Conn) error { return nil }

func TestDialer(t *testing.T) {
	d := &Dialer{Service: echoService{}}
	c, err := d.Send(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Send(&protocol.Hello{AgentID: "good"})
	if f, err := c.Recv(); err != nil || protocol.Name(f) != "Welcome" {
		t.Fatal(f, err)
	}
	c.CloseSend()
	if _, err := c.Recv(); err != io.EOF {
		t.Fatalf("after the handler returned nil: %v", err)
	}

	c, _ = d.Send(context.Background())
	c.Send(&protocol.Hello{AgentID: "bad"})
	if _, err := c.Recv(); protocol.StatusOf(err) != protocol.StatusPermissionDenied {
		t.Fatalf("refused hello: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	c, _ = d.Send(ctx)
	cancel()
	if _, err := c.Recv(); !errors.Is(err, err) || protocol.StatusOf(err) != protocol.StatusCanceled {
		t.Fatalf("after cancel: %v", err)
	}
}
