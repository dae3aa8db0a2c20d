package seglog

import (
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// faultFS is the real filesystem with a shared byte budget for writes (a
// write beyond it is cut short with ENOSPC, like a full disk) and a switch
// that makes fdatasync fail with EIO.
type faultFS struct {
	osFS
	mu       sync.Mutex
	budget   int64 // bytes that may still be written; <0 means unlimited
	failSync bool
	// noCreate makes creating a segment fail with ENOSPC, as a full
	// copy-on-write filesystem or one without free inodes does.
	noCreate bool
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	noCreate := fs.noCreate
	fs.mu.Unlock()
	if noCreate && flag&os.O_CREATE != 0 && strings.HasSuffix(name, segSuffix) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	f, err := fs.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

func (fs *faultFS) set(budget int64, failSync bool) {
	fs.mu.Lock()
	fs.budget, fs.failSync = budget, failSync
	fs.mu.Unlock()
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.budget >= 0 && int64(len(p)) > f.fs.budget {
		n, _ := f.File.WriteAt(p[:f.fs.budget], off)
		f.fs.budget = 0
		return n, syscall.ENOSPC
	}
	if f.fs.budget >= 0 {
		f.fs.budget -= int64(len(p))
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Datasync() error {
	f.fs.mu.Lock()
	fail := f.fs.failSync
	f.fs.mu.Unlock()
	if fail {
		return syscall.EIO
	}
	return f.File.Datasync()
}

// TestDiskFull fills the "disk" in the middle of records, across segment
// rolls: Append fails with ENOSPC, no partial record is ever visible (now or
// after reopen), and appends succeed again once space is back.
func TestDiskFull(t *testing.T) {
	for _, budget := range []int64{0, 1, 19, 20, 100, 5000, 9000} {
		dir := t.TempDir()
		fs := &faultFS{budget: -1}
		l := openT(t, dir, WithFS(fs), WithSegmentBytes(4096), quiet)
		for i := 0; i < 50; i++ {
			appendT(t, l, rec(i))
		}
		fs.set(budget, false)
		n := 50
		var err error
		for ; err == nil; n++ {
			_, err = l.Append([][]byte{rec(n), rec(n + 1000)})
		}
		n-- // the failed append
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("budget %d: %v, want ENOSPC", budget, err)
		}
		var we *WriteError
		if !errors.As(err, &we) || we.File == "" {
			t.Fatalf("budget %d: error does not name the file: %v", budget, err)
		}
		check := func(l *Log, count int) {
			t.Helper()
			offs, vals := readAll(t, l, 0, 4096)
			if len(offs) != count {
				t.Fatalf("budget %d: %d records, want %d", budget, len(offs), count)
			}
			for i, o := range offs {
				j := 50 + (int(o)-50)/2
				want := rec(int(o))
				if o >= 50 {
					want = rec(j)
					if (o-50)%2 == 1 {
						want = rec(j + 1000)
					}
				}
				if string(vals[i]) != string(want) {
					t.Fatalf("budget %d: record %d = %q, want %q", budget, o, vals[i], want)
				}
			}
		}
		count := 50 + 2*(n-50)
		check(l, count)
		fs.set(-1, false)
		if off := appendT(t, l, rec(n), rec(n+1000)); off != uint64(count) {
			t.Fatalf("budget %d: append after space returned at %d, want %d", budget, off, count)
		}
		l.Close()
		l = openT(t, dir, WithSegmentBytes(4096))
		check(l, count+2)
		l.Close()
	}
}

// TestSyncFailureBreaksLog: after a failed fdatasync nothing more is
// accepted until reopen, and reopening recovers what is on disk.
func TestSyncFailureBreaksLog(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{budget: -1}
	l := openT(t, dir, WithFS(fs))
	appendT(t, l, rec(0))
	fs.set(-1, true)
	if _, err := l.Append([][]byte{rec(1)}); !errors.Is(err, ErrBroken) || !strings.Contains(err.Error(), syscall.EIO.Error()) {
		t.Fatalf("append with failing sync: %v", err)
	}
	fs.set(-1, false)
	if _, err := l.Append([][]byte{rec(2)}); !errors.Is(err, ErrBroken) {
		t.Fatalf("append after failed sync: %v, want ErrBroken", err)
	}
	l.Close()
	l = openT(t, dir)
	defer l.Close()
	if l.NextOffset() < 1 {
		t.Fatal("acknowledged record lost")
	}
	appendT(t, l, rec(3))
}
