package testtmpfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestMountFills: a 64 KiB tmpfs refuses a 128 KiB file with ENOSPC.
func TestMountFills(t *testing.T) {
	dir := Mount(t, "64k")
	err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 128<<10), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing 128 KiB to a 64 KiB tmpfs: %v, want ENOSPC", err)
	}
}
