package diskstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/send"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

// smallDisk is an 8 MiB disk for one scenario: the upload directory, the
// options that put the store on it, and how someone else takes 4 MiB of
// it (fill) and gives them back (free).
type smallDisk struct {
	dir        string
	o          Options
	fill, free func(t *testing.T)
}

// onBudget is an 8 MiB byte budget (internal/testkit/testfs): runs anywhere,
// without root.
func onBudget(t *testing.T) smallDisk {
	const size = 8 << 20
	b := testfs.New(size)
	return smallDisk{
		dir:  filepath.Join(t.TempDir(), "up"),
		o:    Options{FS: b, FreeSpace: func(string) (int64, error) { return b.Free(), nil }},
		fill: func(*testing.T) { b.SetLimit(size - 4<<20) },
		free: func(*testing.T) { b.SetLimit(size) },
	}
}

// onTmpfs is a real 8 MiB tmpfs: needs root, required in CI
// (SLUICE_TMPFS=require).
func onTmpfs(t *testing.T) smallDisk {
	mnt := testtmpfs.Mount(t, "8m")
	filler := filepath.Join(mnt, "filler")
	return smallDisk{
		dir: filepath.Join(mnt, "up"),
		fill: func(t *testing.T) {
			if err := os.WriteFile(filler, make([]byte, 4<<20), 0o644); err != nil {
				t.Errorf("filler: %v", err)
			}
		},
		free: func(*testing.T) { os.Remove(filler) },
	}
}

var smallDisks = []struct {
	name string
	disk func(t *testing.T) smallDisk
}{{"budget", onBudget}, {"tmpfs", onTmpfs}}

// A disk that fills while an upload is being written (someone else filled
// it after the free-space check): the writer gets xfer.ErrNoSpace and the
// client a clear no_space refusal; nothing is at DIR/NAME; the partial is
// kept at its last good offset and, once space is freed, the same send
// resumes and completes. On a byte budget and on a real tmpfs.
func TestDiskFullMidUpload(t *testing.T) {
	for _, d := range smallDisks {
		t.Run(d.name, func(t *testing.T) { diskFullMidUpload(t, d.disk(t)) })
	}
}

func diskFullMidUpload(t *testing.T, disk smallDisk) {
	dir := disk.dir
	o := disk.o
	o.SyncEvery = 256 << 10
	s := openT(t, dir, o)
	srv, err := serve.Start(s, serve.Listen{GRPC: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	data := randBytes(5<<20, 20)
	src := tempFile(t, data)
	// Accepted (5 MiB of 8 free), then the disk fills at about 2 MiB:
	// once 2 MiB are sent, before the chunk at 2 MiB is.
	var once bool
	so := send.Options{Name: "big", Chunk: 256 << 10, Progress: func(off, _ int64) {
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
			disk.fill(t)
		}
	}}
	_, err = send.File(ctxT(t), "grpc://"+srv.Addrs.GRPC, src, so)
	if !errors.Is(err, xfer.ErrNoSpace) || !strings.Contains(err.Error(), "not enough free space") {
		t.Fatalf("send on a full disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "big")); !os.IsNotExist(err) {
		t.Fatalf("DIR/big exists after ENOSPC: %v", err)
	}
	in, err := s.Stat("big")
	if err != nil || in.Offset < 1<<20 || in.Offset > 4<<20 {
		t.Fatalf("partial after ENOSPC: %+v %v", in, err)
	}
	disk.free(t)
	so.Progress = nil
	sum, err := send.File(ctxT(t), "grpc://"+srv.Addrs.GRPC, src, so)
	if err != nil {
		t.Fatal(err)
	}
	checkLanded(t, dir, "big", data, sum)
}
