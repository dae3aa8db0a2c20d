package memconn

import (
	"io"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/conntest"
)

// TestConformance runs the protocol.Conn suite over Dialer: sessions,
// statuses, payload ownership, cancel, concurrency.
func TestConformance(t *testing.T) {
	conntest.Run(t, func(t *testing.T, svc protocol.Service) protocol.Dialer { return &Dialer{Service: svc} })
}

// A Pipe carries frames in order through a queue smaller than them, ends
// with io.EOF after CloseSend, and its server end reports the peer it was
// given.
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
