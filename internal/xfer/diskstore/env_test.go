package diskstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/xfer/serve"
)

// env is a store served on every transport, for the tests that drive it
// through real clients.
type env struct {
	dir   string
	store *Uploads
	srv   *serve.Server
}

func startEnv(t *testing.T, o Options) *env {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, o)
	srv, err := serve.Start(s, serve.Listen{GRPC: "127.0.0.1:0", RSocket: "tcp://127.0.0.1:0", TUS: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &env{dir: dir, store: s, srv: srv}
}

func (e *env) urls() map[string]string {
	return map[string]string{
		"grpc":    "grpc://" + e.srv.Addrs.GRPC,
		"rsocket": e.srv.Addrs.RSocket,
		"tus":     "http://" + e.srv.Addrs.TUS + "/files/",
	}
}

func tempFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
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
