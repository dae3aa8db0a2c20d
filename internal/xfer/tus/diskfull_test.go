package tus_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
)

// A disk that fills during a tus PATCH (the body path, ReadFrom, and the
// sidecar's save): 507 Insufficient Storage, the upload kept at the offset
// of the PATCH before (its body is dropped: which of its bytes reached
// the disk is unknown), HEAD says so; once space is freed the client's
// PATCH from there completes the file. On a byte budget and on a real
// tmpfs.
func TestDiskFullTusPatch(t *testing.T) {
	for _, d := range xfertest.SmallDisks {
		t.Run(d.Name, func(t *testing.T) {
			disk := d.Disk(t)
			c := newTUSIn(t, disk.Dir, diskstore.Options{FS: disk.FS, FreeSpace: disk.FreeSpace})
			data := xfertest.RandBytes(5<<20, 21)
			r := c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", "filename "+b64([]byte("full.bin")))
			c.want(r, 201)
			loc := r.Header.Get("Location")
			c.want(c.do("PATCH", loc, data[:1<<20], "Content-Type", octet, "Upload-Offset", "0"), 204)
			disk.Fill(t) // 3 MiB of the 8 left: less than the 4 MiB to come
			c.want(c.do("PATCH", loc, data[1<<20:], "Content-Type", octet, "Upload-Offset", strconv.Itoa(1<<20)), 507)
			if _, err := os.Stat(filepath.Join(disk.Dir, "full.bin")); !os.IsNotExist(err) {
				t.Fatalf("DIR/full.bin exists after ENOSPC: %v", err)
			}
			head := c.do("HEAD", loc, nil)
			c.want(head, 200)
			if got := head.Header.Get("Upload-Offset"); got != strconv.Itoa(1<<20) {
				t.Fatalf("offset after ENOSPC: %s, want %d", got, 1<<20)
			}
			disk.Free(t)
			c.want(c.do("PATCH", loc, data[1<<20:], "Content-Type", octet, "Upload-Offset", strconv.Itoa(1<<20)), 204)
			got, err := os.ReadFile(filepath.Join(disk.Dir, "full.bin"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("DIR/full.bin differs from what was sent (%v)", err)
			}
		})
	}
}
