package send

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/seglog"
)

// failRename is the OS filesystem with renames that fail while fail is
// set: a file whose bytes all arrived cannot land.
type failRename struct {
	seglog.FS
	fail *atomic.Bool
}

func (f failRename) Rename(from, to string) error {
	if f.fail.Load() {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: syscall.EIO}
	}
	return f.FS.Rename(from, to)
}

// TestHashOnlyForALandedFile: a file whose bytes all reached the server
// but which could not land (its rename failed) makes `send` fail, over
// every transport, and the next send lands it. Before, over tus, the
// second send found the upload's offset at its length, took it for done
// and printed the client's own hash with exit 0: the file never landed
// (found by hand, 2026-11-29, with a directory holding the name, which
// Begin now refuses at once).
func TestHashOnlyForALandedFile(t *testing.T) {
	var fail atomic.Bool
	e := startEnv(t, diskstore.Options{SyncEvery: 1 << 20, FS: failRename{seglog.OSFS(), &fail}})
	data := xfertest.RandBytes(1<<20+77, 12)
	src := xfertest.TempFile(t, data)
	for tr, to := range e.URLs() {
		t.Run(tr, func(t *testing.T) {
			name := "obstructed-" + tr
			target := filepath.Join(e.Dir, name)
			fail.Store(true)
			state := t.TempDir() // the tus client's URL memory, shared by both sends
			if sum, err := File(xfertest.Ctx(t), to, src, Options{Name: name, Chunk: 256 << 10, Attempts: 1, StateDir: state}); err == nil {
				t.Fatalf("a send whose file could not land succeeded with %x", sum)
			}
			fail.Store(false)
			sum, err := File(xfertest.Ctx(t), to, src, Options{Name: name, Chunk: 256 << 10, Attempts: 3, StateDir: state})
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatalf("send printed %x, but the file did not land: %v", sum, err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("the landed file differs from what was sent")
			}
		})
	}
}
