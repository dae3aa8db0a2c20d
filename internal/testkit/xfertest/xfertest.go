// Package xfertest is what the file-transfer tests (internal/xfer/...)
// share: a store served on real listeners, random payloads written to
// temp files, the check that a file landed whole, and the small disks the
// full-disk scenarios run on. It is for tests only.
//
// It does not import internal/xfer/diskstore, so that diskstore's own
// (in-package) tests can use it: the store comes in through an open
// function the caller writes.
package xfertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/serve"
	"github.com/sluicehq/sluice/seglog"
)

// Store is an upload store a test opens and serves (diskstore.Uploads).
type Store interface {
	xfer.Backend
	Close() error
}

// Open opens a store with open, fails the test if it cannot, and closes
// the store when the test ends.
func Open[S Store](tb testing.TB, open func() (S, error)) S {
	tb.Helper()
	s, err := open()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// AllTransports serves a store on every transport, each on an ephemeral
// loopback port.
var AllTransports = serve.Listen{GRPC: "127.0.0.1:0", RSocket: "tcp://127.0.0.1:0", TUS: "127.0.0.1:0", HTTP: "127.0.0.1:0"}

// Env is a store in a fresh directory, served as `sluice xfer serve`
// serves it, for the tests that drive it through real clients.
type Env[S Store] struct {
	Dir   string
	Store S
	Srv   *serve.Server
}

// StartEnv opens a store in a fresh temp directory with open and serves
// it on the listeners of l until the test ends.
func StartEnv[S Store](tb testing.TB, open func(dir string) (S, error), l serve.Listen) *Env[S] {
	tb.Helper()
	dir := tb.TempDir()
	s := Open(tb, func() (S, error) { return open(dir) })
	srv, err := serve.Start(s, l)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	return &Env[S]{Dir: dir, Store: s, Srv: srv}
}

// URLs are the addresses `sluice xfer send` takes for the env's gRPC,
// RSocket and tus servers, by transport name.
func (e *Env[S]) URLs() map[string]string {
	return map[string]string{
		"grpc":    "grpc://" + e.Srv.Addrs.GRPC,
		"rsocket": e.Srv.Addrs.RSocket,
		"tus":     "http://" + e.Srv.Addrs.TUS + "/files/",
	}
}

// RandBytes is n random bytes, the same for the same seed.
func RandBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TempFile writes data to a file in a fresh temp directory and returns
// its path.
func TempFile(tb testing.TB, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "src.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Ctx is a context that ends with the test, or after a minute: a bound
// for a transfer that hangs, far above what a passing one takes.
func Ctx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

// CheckLanded fails the test unless sum is data's SHA-256 and DIR/name
// holds exactly data.
func CheckLanded(tb testing.TB, dir, name string, data []byte, sum []byte) {
	tb.Helper()
	want := sha256.Sum256(data)
	if !bytes.Equal(sum, want[:]) {
		tb.Fatalf("sum %x, want %x", sum, want)
	}
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || !bytes.Equal(got, data) {
		tb.Fatalf("DIR/%s differs from the source (%v)", name, err)
	}
}

// SmallDisk is an 8 MiB disk for one scenario: the upload directory, the
// filesystem and free-space probe that put the store on it (nil: the
// real ones), and how someone else takes 4 MiB of it (Fill) and gives
// them back (Free).
type SmallDisk struct {
	Dir        string
	FS         seglog.FS
	FreeSpace  func(dir string) (int64, error)
	Fill, Free func(t *testing.T)
}

// SmallDisks are the two small disks every full-disk scenario runs on.
var SmallDisks = []struct {
	Name string
	Disk func(t *testing.T) SmallDisk
}{{"budget", onBudget}, {"tmpfs", onTmpfs}}

// onBudget is an 8 MiB byte budget (internal/testkit/testfs): runs
// anywhere, without root.
func onBudget(t *testing.T) SmallDisk {
	const size = 8 << 20
	b := testfs.New(size)
	return SmallDisk{
		Dir:       filepath.Join(t.TempDir(), "up"),
		FS:        b,
		FreeSpace: func(string) (int64, error) { return b.Free(), nil },
		Fill:      func(*testing.T) { b.SetLimit(size - 4<<20) },
		Free:      func(*testing.T) { b.SetLimit(size) },
	}
}

// onTmpfs is a real 8 MiB tmpfs: needs root, required in CI
// (SLUICE_TMPFS=require).
func onTmpfs(t *testing.T) SmallDisk {
	mnt := testtmpfs.Mount(t, "8m")
	filler := filepath.Join(mnt, "filler")
	return SmallDisk{
		Dir: filepath.Join(mnt, "up"),
		Fill: func(t *testing.T) {
			if err := os.WriteFile(filler, make([]byte, 4<<20), 0o644); err != nil {
				t.Errorf("filler: %v", err)
			}
		},
		Free: func(*testing.T) { os.Remove(filler) },
	}
}
