package send

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// restartingServer is a transport to a server that dies once, halfway
// through the upload, and refuses connections for refusing attempts
// before it is back, with what it had received kept (a durable offset):
// what a tus client sees when `xfer serve` is killed and restarted.
type restartingServer struct {
	size      int64
	got       []byte
	refusing  int
	died      bool
	offsetsOK int
}

var errRefused = fmt.Errorf("dial tcp 127.0.0.1:1: connect: %w", syscall.ECONNREFUSED)

func (s *restartingServer) Offset(context.Context, string) (int64, int64, bool, error) {
	if s.died && s.refusing > 0 {
		s.refusing--
		return 0, 0, false, errRefused
	}
	s.offsetsOK++
	return int64(len(s.got)), s.size, len(s.got) > 0, nil
}

func (s *restartingServer) Begin(_ context.Context, out xfer.Outgoing) (xfer.Stream, error) {
	if int64(len(s.got)) != out.From {
		return nil, fmt.Errorf("begin at %d, the server has %d", out.From, len(s.got))
	}
	return &restartingStream{s: s}, nil
}

func (s *restartingServer) Reset()       {}
func (s *restartingServer) Close() error { return nil }

type restartingStream struct{ s *restartingServer }

func (st *restartingStream) Chunk(c xfer.Chunk) error {
	s := st.s
	if !s.died && int64(len(s.got)) >= s.size/2 {
		s.died = true // killed: this PATCH finds the port closed
		return errRefused
	}
	if c.Off != int64(len(s.got)) {
		return fmt.Errorf("chunk at %d, the server has %d", c.Off, len(s.got))
	}
	s.got = append(s.got, c.Data...)
	return nil
}

func (st *restartingStream) Finish([]byte) ([]byte, error) {
	sum := sha256.Sum256(st.s.got)
	return sum[:], nil
}
func (st *restartingStream) Cause(err error) error { return err }
func (st *restartingStream) Close()                {}

// TestResumesAcrossServerRestart: a server that answered (its offset) and
// then refuses connections is restarting under the upload, which goes on
// trying (--attempts) and resumes from the server's offset, however the
// transport first sees the death. Before, an upload whose first error
// after the kill was a refused connection (tus: each PATCH is a new
// request) was taken for one that never reached a server, and gave up
// after 5 refusals, 1.5 s into the restart (found by hand: `xfer send`
// over tus against a killed and restarted `xfer serve`). A server that
// never answered still ends the upload after maxRefusals.
func TestResumesAcrossServerRestart(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	now := func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	o := Options{Name: "f", Chunk: 16 << 10, Attempts: 20, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), after: now}
	s := &restartingServer{size: int64(len(data)), refusing: 3 * maxRefusals}
	sum, err := retry(context.Background(), s, "http://127.0.0.1:1/files/", bytes.NewReader(data), int64(len(data)), "f", &o)
	want := sha256.Sum256(data)
	if err != nil || !bytes.Equal(sum, want[:]) || !bytes.Equal(s.got, data) {
		t.Fatalf("upload across a restart refusing %d connections: %v (server has %d of %d bytes)", 3*maxRefusals, err, len(s.got), len(data))
	}
	if s.offsetsOK != 2 {
		t.Errorf("%d offsets asked of a live server, want 2 (the start, the resume)", s.offsetsOK)
	}

	never := &restartingServer{size: int64(len(data)), died: true, refusing: 1 << 30}
	o2 := o
	_, err = retry(context.Background(), never, "http://127.0.0.1:1/files/", bytes.NewReader(data), int64(len(data)), "f", &o2)
	if !errors.Is(err, syscall.ECONNREFUSED) || never.refusing != 1<<30-maxRefusals {
		t.Fatalf("no server: %v after %d refusals, want connection refused after %d", err, 1<<30-never.refusing, maxRefusals)
	}
}
