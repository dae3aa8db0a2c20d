package rsocketxfer

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// TestClientOffersByteCredits: the frame after the client's SETUP is the
// byte-credits offer, without which the server's upload window
// (ByteCredits) does not hold and an upload queues at the server up to its
// read budget.
func TestClientOffersByteCredits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := NewClient("tcp://" + ln.Addr().String())
	defer c.Reset()
	dialed := make(chan error, 1)
	go func() { _, err := c.conn(ctx); dialed <- err }()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := <-dialed; err != nil {
		t.Fatal(err)
	}
	if h := header(t, readFrame(t, s)); h.Type != frame.TypeSetup {
		t.Fatalf("first frame %v, want SETUP", h.Type)
	}
	second := readFrame(t, s)
	if h := header(t, second); h.Type != frame.TypeExt {
		t.Fatalf("the frame after SETUP is %v, want the byte-credits EXT", h.Type)
	}
	if ext := binary.BigEndian.Uint32(second[frame.HeaderSize:]); ext != conn.ExtByteCreditsWindow {
		t.Fatalf("EXT type %#x after SETUP, want ExtByteCreditsWindow %#x", ext, conn.ExtByteCreditsWindow)
	}
}

func readFrame(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var n [3]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, int(n[0])<<16|int(n[1])<<8|int(n[2]))
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func header(t *testing.T, b []byte) frame.Header {
	t.Helper()
	h, err := frame.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
