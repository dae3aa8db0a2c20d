package seglog_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/seglog"
)

// disk is a small disk for one scenario: a directory and the options that
// put the log on it.
type disk func(t *testing.T) (dir string, opts []seglog.Option)

// onBudget is a 256 KiB byte budget (internal/testkit/testfs): runs anywhere.
func onBudget(t *testing.T) (string, []seglog.Option) {
	return t.TempDir(), []seglog.Option{seglog.WithFS(testfs.New(256 << 10))}
}

// onTmpfs is a real 256 KiB tmpfs: needs root, required in CI
// (SLUICE_TMPFS=require).
func onTmpfs(t *testing.T) (string, []seglog.Option) {
	return filepath.Join(testtmpfs.Mount(t, "256k"), "log"), nil
}

// TestDiskFullScenarios runs the full-disk scenarios on a byte budget and
// on a real tmpfs.
func TestDiskFullScenarios(t *testing.T) {
	for _, d := range []struct {
		name string
		disk disk
	}{{"budget", onBudget}, {"tmpfs", onTmpfs}} {
		t.Run(d.name, func(t *testing.T) {
			// Segments smaller than the disk, and one larger (issue 23: a
			// single consumed segment fills the disk).
			for _, seg := range []int64{64 << 10, 1 << 20} {
				diskFullRecovers(t, d.disk, seg)
			}
			// The reservation file is rewritten every 4 records, on
			// the full disk too (an append then fails, with nothing
			// appended, until there is room).
			diskFullRecovers(t, d.disk, 64<<10, seglog.WithSync(seglog.SyncInterval(time.Hour)), seglog.WithOffsetReservation(4))
		})
	}
}

// diskFullRecovers fills the disk until an append fails with ENOSPC,
// consumes everything (RemoveBefore at the end), and checks that appends
// work again at once and that a reopen goes on at the right offset.
func diskFullRecovers(t *testing.T, disk disk, segmentBytes int64, extra ...seglog.Option) {
	dir, opts := disk(t)
	opts = append(opts, seglog.WithSegmentBytes(segmentBytes), seglog.WithLogger(slog.New(slog.DiscardHandler)))
	opts = append(opts, extra...)
	l, err := seglog.Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3000)
	n := 0
	for ; n < 1000; n++ {
		if _, err = l.Append([][]byte{big}); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("segments of %d: filling the disk: %v after %d appends", segmentBytes, err, n)
	}
	written := l.NextOffset()
	if written != uint64(n) {
		t.Fatalf("segments of %d: next offset %d after %d appends", segmentBytes, written, n)
	}
	if _, err := l.RemoveBefore(written); err != nil {
		t.Fatal(err)
	}
	if off, err := l.Append([][]byte{big}); err != nil || off != written {
		t.Fatalf("segments of %d: append after consuming everything: %d, %v", segmentBytes, off, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = seglog.Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.FirstOffset() != written || l.NextOffset() != written+1 {
		t.Fatalf("segments of %d: after reopen first %d next %d, want %d %d", segmentBytes, l.FirstOffset(), l.NextOffset(), written, written+1)
	}
}
