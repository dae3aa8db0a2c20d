// Package testtmpfs mounts small tmpfs file systems for the tests of full
// disks, so that they meet a real ENOSPC at a size they choose instead of
// an injected error. It is for tests only.
//
// Mounting needs root (CAP_SYS_ADMIN): without it the calling test is
// skipped, so these tests run in CI's container and skip elsewhere, unless
// SLUICE_TMPFS=require (set by .ci/run), which makes a mount that cannot
// be done fail the test. The same scenarios run anywhere on a byte budget
// (internal/testkit/testfs) where the code takes a filesystem.
package testtmpfs

import (
	"os"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// Mount mounts a tmpfs of size (mount(8)'s syntax: "256k", "8m") on a
// fresh directory and returns it; it is unmounted when the test ends,
// after the cleanups the test registers later (which close what uses it).
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testskip.Missing(t, "SLUICE_TMPFS", testskip.Root, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		testskip.Missing(t, "SLUICE_TMPFS", testskip.Root, "cannot mount a tmpfs: "+err.Error())
	}
	// Lazily: a file still open (a server the test did not stop) does not
	// keep the mount, and the directory's removal does not fail on it.
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
