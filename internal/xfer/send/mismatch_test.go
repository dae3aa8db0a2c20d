package send

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/rsocket"
)

// countWarns is a logger that counts its Warn records.
func countWarns(n *atomic.Int32) *slog.Logger {
	return slog.New(warnCounter{n})
}

type warnCounter struct{ n *atomic.Int32 }

func (w warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		w.n.Add(1)
	}
	return nil
}
func (w warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnCounter) WithGroup(string) slog.Handler      { return w }

// now is a back-off that does not wait.
func now(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

// `xfer send` at the wrong listener of `xfer serve` fails at once, or
// after one more try, naming the likely mistake, and is not retried 20
// times. Before: gRPC at the RSocket port waited for the server's setup
// timeout (10 s; gRPC's own connect timeout, 10 s too, ended it first)
// on each of 20 attempts; RSocket at the gRPC port was retried 20 times,
// "RESERVED frame on stream 67108864".
func TestWrongListenerFailsFast(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	rs := strings.TrimPrefix(e.Srv.Addrs.RSocket, "tcp://")
	for _, c := range []struct {
		name, to, want string
		warns          int32
	}{
		// The RSocket server closes the gRPC client at its preface: one
		// more try (a restarting server closes so too), then the hint.
		{"grpc-at-rsocket", "grpc://" + rs, "grpc://" + rs + " closed the connection before answering: is it a gRPC listener", 1},
		// The gRPC server's preface is no RSocket frame: at once.
		{"rsocket-at-grpc", "tcp://" + e.Srv.Addrs.GRPC, "tcp://" + e.Srv.Addrs.GRPC + " sent an HTTP/2 preface (a gRPC or HTTP/2 listener), not RSocket", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var warns atomic.Int32
			_, err := Bytes(xfertest.Ctx(t), c.to, []byte("hello"), Options{Name: "x", Log: countWarns(&warns), after: now})
			var pe *xfer.PermanentError
			if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) || warns.Load() != c.warns {
				t.Fatalf("error %v, %d retries; want a permanent error saying %q after %d", err, warns.Load(), c.want, c.warns)
			}
		})
	}
}

// closingServer is fakeServer whose connections, after the first
// break, are accepted and closed before any answer, silent times: a
// server restarting under the upload.
type closingServer struct {
	*fakeServer
	silent int
}

func (c *closingServer) Offset(ctx context.Context, name string) (int64, int64, bool, error) {
	if c.broke && c.silent > 0 {
		c.silent--
		return 0, 0, false, &rsocket.NotRSocketError{Peer: "tcp://fake", Hint: "is it an RSocket listener?"}
	}
	return c.fakeServer.Offset(ctx, name)
}

// An upload the server has answered goes on through connections closed
// before any answer (a restart: connections in the old process's
// backlog are reset), as through refused ones; only a server that never
// answered is taken for the wrong listener.
func TestUnansweredAfterReachedIsRetried(t *testing.T) {
	data := xfertest.RandBytes(300_000, 51)
	f := &closingServer{fakeServer: &fakeServer{size: int64(len(data)), breakAt: 120_000}, silent: 4}
	o := &Options{Name: "f", Chunk: 16 << 10, Attempts: 10, Log: slog.New(slog.DiscardHandler), after: now}
	if _, err := retry(xfertest.Ctx(t), f, "fake", bytes.NewReader(data), int64(len(data)), "memory", o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.have, data) || f.silent != 0 {
		t.Fatalf("the server has %d of %d bytes, %d silent connections left", len(f.have), len(data), f.silent)
	}
}
