package diskstore

import (
	"crypto/sha256"
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/xfertest"
)

// openDescriptors counts this process's open file descriptors.
func openDescriptors(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd here: %v", err)
	}
	return len(ents)
}

// Partial uploads whose writers went (a tus client resetting mid-PATCH in
// a loop leaves one per round) hold no file descriptors: before, each
// kept its data file and sidecar open until it expired, 14,758 after 20 s
// of resets against a ulimit of 20,000. Each still resumes where it was.
func TestIdlePartialsHoldNoDescriptors(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SyncEvery: 1000})
	data := xfertest.RandBytes(8_000, 3)
	sum := sha256.Sum256(data)
	const n = 200
	before := openDescriptors(t)
	ids := make([]string, n)
	for i := range n {
		u, err := s.Begin(fmt.Sprintf("f%03d.bin", i), int64(len(data)), sum[:], "", false)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, u, data[:3000], 0, 1000)
		ids[i] = u.Info().ID
		u.Release()
	}
	if grew := openDescriptors(t) - before; grew > 10 {
		t.Fatalf("%d idle partial uploads hold %d more file descriptors, want none", n, grew)
	}
	for _, id := range ids[:3] {
		u, err := s.Acquire(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if off := u.Offset(); off != 3000 {
			t.Fatalf("resumed at %d, want 3000", off)
		}
		writeAll(t, u, data, 3000, 1000)
		got, err := u.Finish(sum[:], "test")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(sum[:]) {
			t.Fatalf("sha256 %x, want %x", got, sum)
		}
		u.Release()
	}
}
