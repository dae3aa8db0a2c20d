package send

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

// BenchmarkSend sends a 64 MiB file from the page cache over each
// transport to a store in a temp dir (timed to the server's verified
// answer). Noisy on a shared machine: compare side by side.
func BenchmarkSend(b *testing.B) {
	dir := b.TempDir()
	s, err := diskstore.Open(dir, diskstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	srv, err := serve.Start(s, serve.Listen{GRPC: "127.0.0.1:0", RSocket: "tcp://127.0.0.1:0", TUS: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	data := xfertest.RandBytes(64<<20, 40)
	src := tempFileB(b, data)
	for _, tr := range []struct{ name, url string }{
		{"grpc", "grpc://" + srv.Addrs.GRPC}, {"rsocket", srv.Addrs.RSocket}, {"tus", "http://" + srv.Addrs.TUS + "/files/"},
	} {
		b.Run(tr.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := File(context.Background(), tr.url, src, Options{Name: fmt.Sprint("b", i), StateDir: b.TempDir()}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
