package sink

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestDataDirLocked: a second sink on the same data directory is refused
// with a clear error while the first runs, and may start once it closed.
func TestDataDirLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{DataDir: dir, Logger: discardLogger()})
	want := fmt.Sprintf("data %s is in use by another sluice process (pid %d)", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		first.Close()
		t.Fatalf("second sink on one data directory: err %v, want it to contain %q", err, want)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(Config{DataDir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("after Close, the data directory should be free: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}
