package diskstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
)

// TestDamageAtRestRestartsTheUpload: a partial whose bytes changed on
// disk while the server was down is read back by its first writer after
// the restart and starts again from zero, so the file that lands is the
// one the client sent. Before, the sidecar's hash state was trusted: the
// upload finished "verified" with the damaged byte in the file.
func TestDamageAtRestRestartsTheUpload(t *testing.T) {
	for _, how := range []string{"begin", "acquire", "stat", "intact"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			data := xfertest.RandBytes(3<<20+5000, 7)
			s := openT(t, dir, Options{SyncEvery: 1 << 20})
			u, err := s.Begin("f", int64(len(data)), nil, "", false)
			if err != nil {
				t.Fatal(err)
			}
			id := u.Info().ID
			writeAll(t, u, data[:2<<20+100], 0, 64<<10)
			u.Release() // checkpoints
			s.Close()
			if how != "intact" {
				part := filepath.Join(dir, PartialDir, id+".part")
				f, err := os.OpenFile(part, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 1)
				f.ReadAt(b, 1<<20+17)
				b[0] ^= 0x40
				f.WriteAt(b, 1<<20+17)
				f.Close()
			}

			s2 := openT(t, dir, Options{})
			if how == "stat" {
				// A tus HEAD, or an offset request, before any writer.
				in, err := s2.StatID(id)
				if err != nil || in.Offset != 0 {
					t.Fatalf("StatID after the restart: offset %d, %v; want 0", in.Offset, err)
				}
			}
			if how == "acquire" {
				u, err = s2.Acquire(context.Background(), id)
			} else {
				u, err = s2.Begin("f", int64(len(data)), nil, "", false)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := int64(0)
			if how == "intact" {
				want = 2<<20 + 100
			}
			if got := u.Offset(); got != want {
				t.Fatalf("the resumed upload goes on at %d, want %d", got, want)
			}
			writeAll(t, u, data, int(want), 64<<10)
			sum := sha256.Sum256(data)
			if _, err := u.Finish(sum[:], "test"); err != nil {
				t.Fatal(err)
			}
			u.Release()
			got, err := os.ReadFile(filepath.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("the landed file differs from what the client sent")
			}
			if how != "intact" && s2.Stats.Salvaged.Load() != 1 {
				t.Fatalf("Salvaged = %d, want 1", s2.Stats.Salvaged.Load())
			}
		})
	}
}
