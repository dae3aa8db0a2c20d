// Package testfs gives the tests of full disks a small disk anywhere: a
// seglog.FS whose files are real files, with a byte budget playing the
// disk's size. A write that would take the files beyond the budget writes
// what fits and fails with ENOSPC, as on a full disk; truncating, removing
// or renaming over a file gives its bytes back. It needs no root, unlike
// internal/testkit/testtmpfs, whose real tmpfs the same scenarios keep one test on.
// It is for tests only.
//
// Only files opened through the Budget count, from their size when first
// opened: give each test a fresh directory. Bytes are counted exactly (no
// blocks), and a removed file's bytes are free at once even while it is
// still open.
package testfs

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/seglog"
)

// Budget is a filesystem with a byte budget. It is safe for concurrent
// use.
type Budget struct {
	base seglog.FS

	mu    sync.Mutex
	limit int64
	used  int64
	files map[string]*node
}

// node is one file's share of the budget.
type node struct {
	size    int64
	removed bool // its bytes are no longer counted
}

// New returns a filesystem on the operating system's with limit bytes of
// room.
func New(limit int64) *Budget {
	return &Budget{base: seglog.OSFS(), limit: limit, files: map[string]*node{}}
}

// Used is the bytes the files take; Free what is left of the budget.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Budget) Free() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.limit-b.used, 0)
}

// SetLimit changes the budget (space freed or taken by someone else).
func (b *Budget) SetLimit(limit int64) {
	b.mu.Lock()
	b.limit = limit
	b.mu.Unlock()
}

func (b *Budget) OpenFile(name string, flag int, perm os.FileMode) (seglog.File, error) {
	f, err := b.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := filepath.Clean(name)
	n := b.files[key]
	if n == nil {
		n = &node{}
		b.files[key] = n
	}
	b.used += size - n.size // O_TRUNC, or a file first seen
	n.size = size
	return &file{File: f, b: b, n: n}, nil
}

func (b *Budget) Remove(name string) error {
	if err := b.base.Remove(name); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := filepath.Clean(name)
	if n := b.files[key]; n != nil {
		b.drop(n)
		delete(b.files, key)
	}
	return nil
}

func (b *Budget) Rename(oldpath, newpath string) error {
	if err := b.base.Rename(oldpath, newpath); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	from, to := filepath.Clean(oldpath), filepath.Clean(newpath)
	if from == to {
		return nil
	}
	if n := b.files[to]; n != nil {
		b.drop(n) // replaced
		delete(b.files, to)
	}
	if n := b.files[from]; n != nil {
		b.files[to] = n
		delete(b.files, from)
	}
	return nil
}

// drop stops counting n. Caller holds mu.
func (b *Budget) drop(n *node) {
	if !n.removed {
		b.used -= n.size
		n.removed = true
	}
}

func (b *Budget) ReadDir(name string) ([]os.DirEntry, error) { return b.base.ReadDir(name) }
func (b *Budget) MkdirAll(path string, perm os.FileMode) error {
	return b.base.MkdirAll(path, perm)
}
func (b *Budget) SyncDir(dir string) error { return b.base.SyncDir(dir) }

type file struct {
	seglog.File
	b *Budget
	n *node
}

// WriteAt writes what fits in the budget; the rest fails with ENOSPC.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	want := p
	if !f.n.removed {
		// Room for the file to end at: its size now plus what is free.
		room := f.n.size + max(b.limit-b.used, 0)
		if end := off + int64(len(p)); end > room {
			want = p[:max(min(room-off, int64(len(p))), 0)]
		}
	}
	n, err := f.File.WriteAt(want, off)
	if end := off + int64(n); end > f.n.size {
		if !f.n.removed {
			b.used += end - f.n.size
		}
		f.n.size = end
	}
	if err == nil && len(want) < len(p) {
		err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, err
}

// Truncate grows or shrinks the file's share (growing may exceed the
// budget, as a sparse file does).
func (f *file) Truncate(size int64) error {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	if !f.n.removed {
		b.used += size - f.n.size
	}
	f.n.size = size
	return nil
}
