package xfer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
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
// it after the free-space check): the writer gets ErrNoSpace and the
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
	srv, err := Start(s, Listen{GRPC: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	data := randBytes(5<<20, 20)
	src := tempFile(t, data)
	// Accepted (5 MiB of 8 free), then the disk fills at about 2 MiB.
	var once bool
	so := SendOptions{Name: "big", Chunk: 256 << 10, corrupt: func(off int64) bool {
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
		return false
	}}
	_, err = Send(ctxT(t), "grpc://"+srv.Addrs.GRPC, src, so)
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
	disk.free(t)
	so.corrupt = nil
	sum, err := Send(ctxT(t), "grpc://"+srv.Addrs.GRPC, src, so)
	if err != nil {
		t.Fatal(err)
	}
	checkLanded(t, dir, "big", data, sum)
}

// A disk that fills during a tus PATCH (the body path, ReadFrom, and the
// sidecar's save): 507 Insufficient Storage, the upload kept at the offset
// of the PATCH before (its body is dropped: which of its bytes reached
// the disk is unknown), HEAD says so; once space is freed the client's
// PATCH from there completes the file. On a byte budget and on a real
// tmpfs.
func TestDiskFullTusPatch(t *testing.T) {
	for _, d := range smallDisks {
		t.Run(d.name, func(t *testing.T) {
			disk := d.disk(t)
			c := newTUSIn(t, disk.dir, disk.o)
			data := randBytes(5<<20, 21)
			r := c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", "filename "+b64([]byte("full.bin")))
			c.want(r, 201)
			loc := r.Header.Get("Location")
			c.want(c.do("PATCH", loc, data[:1<<20], "Content-Type", octet, "Upload-Offset", "0"), 204)
			disk.fill(t) // 3 MiB of the 8 left: less than the 4 MiB to come
			c.want(c.do("PATCH", loc, data[1<<20:], "Content-Type", octet, "Upload-Offset", strconv.Itoa(1<<20)), 507)
			if _, err := os.Stat(filepath.Join(disk.dir, "full.bin")); !os.IsNotExist(err) {
				t.Fatalf("DIR/full.bin exists after ENOSPC: %v", err)
			}
			head := c.do("HEAD", loc, nil)
			c.want(head, 200)
			if got := head.Header.Get("Upload-Offset"); got != strconv.Itoa(1<<20) {
				t.Fatalf("offset after ENOSPC: %s, want %d", got, 1<<20)
			}
			disk.free(t)
			c.want(c.do("PATCH", loc, data[1<<20:], "Content-Type", octet, "Upload-Offset", strconv.Itoa(1<<20)), 204)
			got, err := os.ReadFile(filepath.Join(disk.dir, "full.bin"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("DIR/full.bin differs from what was sent (%v)", err)
			}
		})
	}
}
