package testfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBudget: writes fit the budget and the one that does not writes what
// fits and fails with ENOSPC; overwriting takes nothing more; truncating,
// removing and renaming over a file give its bytes back.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	b := New(100)
	open := func(name string) interface {
		WriteAt([]byte, int64) (int, error)
		Truncate(int64) error
		Close() error
	} {
		f, err := b.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := open("a")
	if n, err := a.WriteAt(make([]byte, 60), 0); n != 60 || err != nil {
		t.Fatalf("60 bytes of 100: %d, %v", n, err)
	}
	if n, err := a.WriteAt(make([]byte, 30), 10); n != 30 || err != nil || b.Used() != 60 {
		t.Fatalf("overwrite: %d, %v, used %d", n, err, b.Used())
	}
	c := open("c")
	if n, err := c.WriteAt(make([]byte, 60), 0); n != 40 || !errors.Is(err, syscall.ENOSPC) || b.Free() != 0 {
		t.Fatalf("60 bytes with 40 free: %d, %v, free %d", n, err, b.Free())
	}
	if info, _ := os.Stat(filepath.Join(dir, "c")); info.Size() != 40 {
		t.Fatalf("c holds %d bytes", info.Size())
	}
	if err := c.Truncate(10); err != nil || b.Used() != 70 {
		t.Fatalf("truncate: %v, used %d", err, b.Used())
	}
	if err := b.Remove(filepath.Join(dir, "a")); err != nil || b.Used() != 10 {
		t.Fatalf("remove: %v, used %d", err, b.Used())
	}
	if n, err := a.WriteAt(make([]byte, 200), 60); n != 200 || err != nil || b.Used() != 10 {
		t.Fatalf("write to a removed file: %d, %v, used %d", n, err, b.Used())
	}
	d := open("d")
	d.WriteAt(make([]byte, 50), 0)
	if err := b.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "c")); err != nil || b.Used() != 50 {
		t.Fatalf("rename over: %v, used %d", err, b.Used())
	}
	if f, err := b.OpenFile(filepath.Join(dir, "c"), os.O_RDWR|os.O_TRUNC, 0); err != nil || b.Used() != 0 {
		t.Fatalf("O_TRUNC: %v, used %d", err, b.Used())
	} else {
		f.Close()
	}
	a.Close()
	c.Close()
	d.Close()
}
