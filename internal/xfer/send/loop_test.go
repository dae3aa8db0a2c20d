package send

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
)

// fakeServer is a transport whose server keeps every chunk durable at
// once, and whose connection breaks once, after breakAt bytes: what the
// upload loop must get through on any transport.
type fakeServer struct {
	size    int64
	have    []byte
	breakAt int
	broke   bool
	begins  []int64 // the From of each Begin
	causes  int     // Cause calls
	resets  int
}

func (f *fakeServer) Offset(context.Context, string) (int64, int64, bool, error) {
	return int64(len(f.have)), f.size, len(f.begins) > 0, nil
}

func (f *fakeServer) Begin(_ context.Context, out xfer.Outgoing) (xfer.Stream, error) {
	if out.From != int64(len(f.have)) {
		return nil, &xfer.RemoteError{Code: xfer.CodeOffset, Msg: fmt.Sprintf("begin at %d, server has %d", out.From, len(f.have))}
	}
	f.begins = append(f.begins, out.From)
	return &fakeStream{f}, nil
}

func (f *fakeServer) Reset()       { f.resets++ }
func (f *fakeServer) Close() error { return nil }

type fakeStream struct{ f *fakeServer }

func (s *fakeStream) Chunk(c xfer.Chunk) error {
	f := s.f
	if c.Off != int64(len(f.have)) || xfer.CRC32C(c.Data) != c.CRC32C {
		return &xfer.RemoteError{Code: xfer.CodeOffset, Msg: "bad chunk"}
	}
	if !f.broke && len(f.have)+len(c.Data) > f.breakAt {
		f.broke = true
		return errors.New("connection reset by peer")
	}
	f.have = append(f.have, c.Data...)
	return nil
}

func (s *fakeStream) Cause(err error) error { s.f.causes++; return err }

func (s *fakeStream) Finish(sum []byte) ([]byte, error) {
	got := sha256.Sum256(s.f.have)
	return got[:], nil
}

func (s *fakeStream) Close() {}

// TestUploadLoopResumesOverAnyTransport: the one upload loop, over a
// transport that drops its connection mid-upload, asks the stream why
// (Cause), resets the connection, asks the offset again and begins
// from it, and the server ends with the whole file and its SHA-256.
func TestUploadLoopResumesOverAnyTransport(t *testing.T) {
	data := xfertest.RandBytes(300_000, 50)
	f := &fakeServer{size: int64(len(data)), breakAt: 120_000}
	o := &Options{Name: "f", Chunk: 16 << 10, Attempts: 3, Log: slog.New(slog.DiscardHandler)}
	sum, err := retry(xfertest.Ctx(t), f, "fake", bytes.NewReader(data), int64(len(data)), "memory", o)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if !bytes.Equal(sum, want[:]) || !bytes.Equal(f.have, data) {
		t.Fatalf("the server has %d bytes, sum %x; want the %d sent, %x", len(f.have), sum, len(data), want)
	}
	if len(f.begins) != 2 || f.begins[0] != 0 || f.begins[1] == 0 || f.begins[1] > 120_000 {
		t.Fatalf("begins at %v; want 0 then the offset the server had when the connection broke", f.begins)
	}
	if f.causes != 1 || f.resets != 1 {
		t.Fatalf("Cause asked %d times, Reset %d; want once each", f.causes, f.resets)
	}
}
