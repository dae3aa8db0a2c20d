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

// BenchmarkSendBytes sends 32 MiB from memory over gRPC and RSocket at
// three chunk sizes. Its B/op and allocs/op count the copies and
// allocations per upload (both ends are in the process), which unlike
// the time do not depend on what else the machine runs.
func BenchmarkSendBytes(b *testing.B) {
	s, err := diskstore.Open(b.TempDir(), diskstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	srv, err := serve.Start(s, serve.Listen{GRPC: "127.0.0.1:0", RSocket: "tcp://127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	data := xfertest.RandBytes(32<<20, 41)
	for _, tr := range []struct{ name, url string }{{"grpc", "grpc://" + srv.Addrs.GRPC}, {"rsocket", srv.Addrs.RSocket}} {
		for _, chunk := range []int{16 << 10, 256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", tr.name, chunk>>10), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := Bytes(context.Background(), tr.url, data, Options{Name: fmt.Sprint("m", i), Chunk: chunk}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
