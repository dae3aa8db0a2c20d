package diskstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/send"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

// A disk that fills while an upload is being written (someone else filled
// it after the free-space check): the writer gets xfer.ErrNoSpace and the
// client a clear no_space refusal; nothing is at DIR/NAME; the partial is
// kept at its last good offset and, once space is freed, the same send
// resumes and completes. On a byte budget and on a real tmpfs.
func TestDiskFullMidUpload(t *testing.T) {
	for _, d := range xfertest.SmallDisks {
		t.Run(d.Name, func(t *testing.T) { diskFullMidUpload(t, d.Disk(t)) })
	}
}

func diskFullMidUpload(t *testing.T, disk xfertest.SmallDisk) {
	dir := disk.Dir
	o := Options{FS: disk.FS, FreeSpace: disk.FreeSpace}
	o.SyncEvery = 256 << 10
	s := openT(t, dir, o)
	srv, err := serve.Start(s, serve.Listen{GRPC: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	data := xfertest.RandBytes(5<<20, 20)
	src := xfertest.TempFile(t, data)
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
			disk.Fill(t)
		}
	}}
	_, err = send.File(xfertest.Ctx(t), "grpc://"+srv.Addrs.GRPC, src, so)
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
	disk.Free(t)
	so.Progress = nil
	sum, err := send.File(xfertest.Ctx(t), "grpc://"+srv.Addrs.GRPC, src, so)
	if err != nil {
		t.Fatal(err)
	}
	xfertest.CheckLanded(t, dir, "big", data, sum)
}
