package grpctransport_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
)

// endingSvc welcomes an agent, acknowledges acks messages (whatever the
// agent sends), then ends the session with PermissionDenied.
type endingSvc struct{ acks int }

func (s endingSvc) ServeSend(c protocol.Conn) error {
	if _, err := c.Recv(); err != nil {
		return err
	}
	if err := c.Send(&protocol.Welcome{Version: protocol.Version, Credits: protocol.Credits{Messages: 8, Bytes: 1 << 20}}); err != nil {
		return err
	}
	for i := range s.acks {
		id := uint64(i + 1)
		if err := c.Send(&protocol.Ack{Ranges: []protocol.IDRange{{First: id, Last: id}}}); err != nil {
			return err
		}
	}
	return protocol.Errorf(protocol.StatusPermissionDenied, "the session ends here")
}

func (endingSvc) ServeRead(protocol.Conn) error { return nil }

// TestSendAfterEndLeavesRecvToTheReader: while the session's reader
// reads, a Send that finds the stream ended reports the status it ended
// with, and does not call Recv itself: gRPC forbids two goroutines in
// Recv on one stream, and a Recv by Send could take a response meant for
// the reader. The reader gets the Welcome, every Ack and the status.
// Before, Send called Recv (a data race under -race, seen in package
// client's TestProduceIdempotentRetryIsDuplicate; run this one with
// -race, as scripts/race.sh does).
func TestSendAfterEndLeavesRecvToTheReader(t *testing.T) {
	const acks = 200
	d := dial(t, endingSvc{acks: acks})
	for n := range 20 {
		c, err := d.Send(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(&protocol.Hello{AgentID: "a", Version: protocol.Version}); err != nil {
			t.Fatal(err)
		}
		// The Welcome read here first, as the agent does before its
		// reader starts: a Send that finds the stream ended before
		// any Recv reads the rest itself.
		if f, err := c.Recv(); err != nil {
			t.Fatal(err)
		} else if _, ok := f.(*protocol.Welcome); !ok {
			t.Fatalf("first frame %T", f)
		}
		read := make(chan error, 1)
		got := 0
		go func() {
			for {
				f, err := c.Recv()
				if err != nil {
					read <- err
					return
				}
				if _, ok := f.(*protocol.Ack); ok {
					got++
				}
			}
		}()
		var sendErr error
		for i := 0; sendErr == nil && i < 1_000_000; i++ {
			sendErr = c.Send(&protocol.Message{ID: uint64(i + 1), Records: 1, Codec: protocol.CodecPlain, Payload: []byte("x")})
		}
		if protocol.StatusOf(sendErr) != protocol.StatusPermissionDenied {
			t.Fatalf("Send after the end: %v, want PermissionDenied", sendErr)
		}
		if err := <-read; protocol.StatusOf(err) != protocol.StatusPermissionDenied {
			t.Fatalf("the reader ended with %v, want PermissionDenied", err)
		}
		if got != acks {
			t.Fatalf("session %d: the reader got %d acks of %d", n, got, acks)
		}
		c.Close(nil)
	}
}
