package seglog

import (
	"io"
	"os"
	"path/filepath"
)

// FS is the slice of the filesystem a Log uses (WithFS): the operating
// system's by default (OSFS). Tests substitute one to inject failures at
// exact points, or to give the log a small disk where no small filesystem
// can be mounted (internal/testkit/testfs's byte budget). Paths are the operating
// system's.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	ReadDir(name string) ([]os.DirEntry, error)
	MkdirAll(path string, perm os.FileMode) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Truncate(size int64) error
	// Datasync flushes the file's data (and the metadata needed to read it).
	Datasync() error
	Size() (int64, error)
	Name() string
}

// OSFS is the operating system's filesystem, the default.
func OSFS() FS { return osFS{} }

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(a, b string) error                     { return os.Rename(a, b) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) SyncDir(dir string) error                     { return SyncDir(dir) }

type osFile struct{ *os.File }

func (f osFile) Datasync() error { return datasync(f.File) }
func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// SyncDir fsyncs directory dir, making the creations, renames and
// removals of entries in it durable. It is the one implementation in
// sluice (the sink uses it for its data directories).
func SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
