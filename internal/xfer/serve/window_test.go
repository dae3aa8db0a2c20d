package serve

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/rsocketxfer"
	"github.com/sluicehq/sluice/rsocket"
)

// heldBackend's uploads take no chunk until release is closed, so a
// sender can have in flight exactly what the server's window allows.
type heldBackend struct {
	xfer.Backend
	release chan struct{}
}

func (b heldBackend) Begin(name string, size int64, sha []byte, meta string, fresh bool) (xfer.BackendUpload, error) {
	u, err := b.Backend.Begin(name, size, sha, meta, fresh)
	if err != nil {
		return nil, err
	}
	return heldUpload{u, b.release}, nil
}

type heldUpload struct {
	xfer.BackendUpload
	release chan struct{}
}

func (u heldUpload) Write(off int64, p []byte, crc uint32) (int64, error) {
	<-u.release
	return u.BackendUpload.Write(off, p, crc)
}

// An RSocket upload may have 8 MiB in flight (rsocketxfer.ByteCredits)
// before the server takes any of it, as gRPC's window, whatever the chunk
// size: with RSocket's default 64 channel credits, 16 KiB chunks had 1 MiB
// in flight (an upload over a 150 ms round trip capped near 7 MB/s).
func TestRSocketUploadWindow(t *testing.T) {
	s, err := diskstore.Open(t.TempDir(), diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	release := make(chan struct{})
	srv, err := Start(heldBackend{s, release}, Listen{RSocket: "tcp://127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := rsocket.Dial(ctx, srv.Addrs.RSocket, rsocket.WithMaxPayloadSize(rsocketxfer.MaxPayloadSize))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const chunk = 16 << 10
	const want = rsocketxfer.ByteCredits / chunk // 512
	begin := rsocketxfer.AppendBegin(nil, rsocketxfer.Begin{Name: "f.bin", Size: 2 * want * chunk})
	ch, err := c.RequestChannel(ctx, rsocket.Payload{Metadata: []byte(rsocketxfer.MetaUpload), Data: begin}, 64)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	go func() {
		data := make([]byte, chunk)
		meta := rsocketxfer.AppendChunkMeta(nil, xfer.CRC32C(data))
		for range 2 * want {
			if ch.Send(rsocket.Payload{Metadata: meta, Data: data}) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	testwait.For(t, "8 MiB of 16 KiB chunks sent while the server takes none", func() bool { return sent.Load() >= want-1 })
}
