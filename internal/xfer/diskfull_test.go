package xfer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
)

// A disk that fills while an upload is being written (someone else filled
// it after the free-space check): the writer gets ErrNoSpace and the
// client a clear no_space refusal; nothing is at DIR/NAME; the partial is
// kept at its last good offset and, once space is freed, the same send
// resumes and completes.
func TestDiskFullMidUpload(t *testing.T) {
	mnt := testtmpfs.Mount(t, "8m")
	dir := filepath.Join(mnt, "up")
	s := openT(t, dir, Options{SyncEvery: 256 << 10})
	srv, err := Start(s, Listen{GRPC: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	data := randBytes(5<<20, 20)
	src := tempFile(t, data)
	// Accepted (5 MiB of 8 free), then the disk fills at about 2 MiB.
	filler := filepath.Join(mnt, "filler")
	var once bool
	o := SendOptions{Name: "big", Chunk: 256 << 10, corrupt: func(off int64) bool {
		if off >= 2<<20 && !once {
			once = true
			// The client runs ahead of the server by up to the gRPC
			// window (8 MiB): fill the disk only once the server has
			// the upload and 1 MiB of it, or its Begin finds the disk
			// full already (the test failed so, once in a few runs).
			for deadline := time.Now().Add(time.Minute); s.Stats.BytesReceived.Load() < 1<<20; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Errorf("the server never received 1 MiB")
					break
				}
			}
			if err := os.WriteFile(filler, make([]byte, 4<<20), 0o644); err != nil {
				t.Errorf("filler: %v", err)
			}
		}
		return false
	}}
	_, err = Send(ctxT(t), "grpc://"+srv.Addrs.GRPC, src, o)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "not enough free space") {
		t.Fatalf("send on a full disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "big")); !os.IsNotExist(err) {
		t.Fatalf("DIR/big exists after ENOSPC: %v", err)
	}
	in, err := s.Stat("big")
	if err != nil || in.Offset < 1<<20 || in.Offset > 4<<20 {
		t.Fatalf("partial after ENOSPC: %+v %v", in, err)
	}
	os.Remove(filler)
	o.corrupt = nil
	sum, err := Send(ctxT(t), "grpc://"+srv.Addrs.GRPC, src, o)
	if err != nil {
		t.Fatal(err)
	}
	checkLanded(t, dir, "big", data, sum)
}
