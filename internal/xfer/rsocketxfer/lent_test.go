package rsocketxfer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/rsocket"
)

// A Stable chunk (the upload loop's slice of a file in memory) is sent
// from the caller's memory (rsocket.Sink.SendLent), not copied into its
// frame; any other chunk, whose buffer the loop reuses once Chunk
// returns, is copied as before. The file lands whole either way.
func TestStableChunksNotCopied(t *testing.T) {
	store, err := diskstore.Open(t.TempDir(), diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = rsocket.Serve(ctx, ln, &Responder{Store: store}, ServerOptions()...)
	}()
	defer func() { cancel(); <-served }()

	const chunk, n = 128 << 10, 8
	data := make([]byte, n*chunk)
	_, _ = rand.Read(data)
	c := NewClient("tcp://" + ln.Addr().String())
	defer c.Close()
	st, err := c.Begin(ctx, xfer.Outgoing{Name: "stable", Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	reused := make([]byte, chunk)
	for i := range n {
		p := data[i*chunk : (i+1)*chunk]
		ch := xfer.Chunk{Off: int64(i * chunk), Data: p, CRC32C: xfer.CRC32C(p), Orig: p, Stable: i%2 == 0}
		if !ch.Stable {
			ch.Data = reused[:copy(reused, p)]
		}
		if err := st.Chunk(ch); err != nil {
			t.Fatal(st.Cause(err))
		}
		if !ch.Stable {
			clear(reused) // what a reused block would hold next
		}
	}
	want := sha256.Sum256(data)
	sum, err := st.Finish(want[:])
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if string(sum) != string(want[:]) {
		t.Fatalf("server's SHA-256 %x, want %x", sum, want)
	}
	if lent := c.c.PayloadsLent(); lent != n/2 {
		t.Fatalf("%d chunks sent from the caller's memory, want the %d Stable ones", lent, n/2)
	}
}
