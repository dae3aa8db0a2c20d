package tus_test

import (
	"bytes"
	"crypto/sha256"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

func randBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func openT(t *testing.T, dir string, o diskstore.Options) *diskstore.Uploads {
	t.Helper()
	s, err := diskstore.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// env is a store served over tus as `sluice xfer serve --tus` serves it.
type env struct {
	dir   string
	store *diskstore.Uploads
	srv   *serve.Server
}

func startEnv(t *testing.T, o diskstore.Options) *env {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, o)
	srv, err := serve.Start(s, serve.Listen{TUS: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &env{dir: dir, store: s, srv: srv}
}

func tempFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func checkLanded(t *testing.T, dir, name string, data []byte, sum []byte) {
	t.Helper()
	want := sha256.Sum256(data)
	if !bytes.Equal(sum, want[:]) {
		t.Fatalf("sum %x, want %x", sum, want)
	}
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("DIR/%s differs from the source (%v)", name, err)
	}
}

// smallDisk is an 8 MiB disk for one scenario: the upload directory, the
// options that put the store on it, and how someone else takes 4 MiB of
// it (fill) and gives them back (free). (internal/xfer/diskstore's
// full-disk tests have the same two.)
type smallDisk struct {
	dir        string
	o          diskstore.Options
	fill, free func(t *testing.T)
}

var smallDisks = []struct {
	name string
	disk func(t *testing.T) smallDisk
}{{"budget", onBudget}, {"tmpfs", onTmpfs}}

// onBudget is an 8 MiB byte budget (internal/testkit/testfs): runs
// anywhere, without root.
func onBudget(t *testing.T) smallDisk {
	const size = 8 << 20
	b := testfs.New(size)
	return smallDisk{
		dir:  filepath.Join(t.TempDir(), "up"),
		o:    diskstore.Options{FS: b, FreeSpace: func(string) (int64, error) { return b.Free(), nil }},
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

// partialFiles lists DIR/.partial but for its lock.
func partialFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(dir, diskstore.PartialDir))
	var names []string
	for _, e := range ents {
		if e.Name() != dirlock.FileName {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}
