package diskstore

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/seglog"
)

// syncLog is a filesystem that notes, per file, the bytes written since its
// last fdatasync, and at each rename how many of the renamed file's bytes
// were not yet synced: what a power cut right after the rename would lose.
type syncLog struct {
	seglog.FS
	mu       sync.Mutex
	unsynced map[string]int // by path
	renamed  map[string]int // new path → unsynced bytes at the rename
}

type syncLogFile struct {
	seglog.File
	l    *syncLog
	path string
}

func (l *syncLog) OpenFile(name string, flag int, perm os.FileMode) (seglog.File, error) {
	f, err := l.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &syncLogFile{File: f, l: l, path: name}, nil
}

func (l *syncLog) Rename(oldpath, newpath string) error {
	l.mu.Lock()
	l.renamed[newpath] = l.unsynced[oldpath]
	l.unsynced[newpath] = l.unsynced[oldpath]
	l.mu.Unlock()
	return l.FS.Rename(oldpath, newpath)
}

func (f *syncLogFile) WriteAt(p []byte, off int64) (int, error) {
	f.l.mu.Lock()
	f.l.unsynced[f.path] += len(p)
	f.l.mu.Unlock()
	return f.File.WriteAt(p, off)
}

func (f *syncLogFile) Datasync() error {
	f.l.mu.Lock()
	f.l.unsynced[f.path] = 0
	f.l.mu.Unlock()
	return f.File.Datasync()
}

// TestFinishSyncsBeforeRename: when Finish renames an upload into place,
// every byte of it is already fdatasynced, so a crash right after the
// rename cannot leave a complete-looking file with missing data
// (mutation_renamebeforefsync).
func TestFinishSyncsBeforeRename(t *testing.T) {
	dir := t.TempDir()
	fs := &syncLog{FS: seglog.OSFS(), unsynced: map[string]int{}, renamed: map[string]int{}}
	s := openT(t, dir, Options{FS: fs, SyncEvery: 1 << 30})
	data := xfertest.RandBytes(10_000, 7)
	want := sha256.Sum256(data)
	u, err := s.Begin("f.bin", int64(len(data)), want[:], "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, u, data, 0, 1000)
	if _, err := u.Finish(want[:], "test"); err != nil {
		t.Fatal(err)
	}
	u.Release()
	final := filepath.Join(dir, "f.bin")
	fs.mu.Lock()
	n, ok := fs.renamed[final]
	fs.mu.Unlock()
	if !ok {
		t.Fatalf("no rename to %s seen", final)
	}
	if n != 0 {
		t.Fatalf("INVARIANT rename-before-fsync: the upload was renamed into place with %d of its bytes not yet fdatasynced", n)
	}
}
