package diskstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/seglog"
)

// beginIdle begins a tus-like upload of name (BeginKept, fresh), writes a
// few bytes and lets it go, as a client that reset mid-PATCH does.
func beginIdle(t testing.TB, s *Uploads, name string) string {
	t.Helper()
	u, err := s.BeginKept(name, 1<<20, nil, "", true)
	if err != nil {
		t.Fatalf("begin %s: %v", name, err)
	}
	p := []byte("some bytes")
	if _, err := u.Write(0, p, xfer.CRC32C(p)); err != nil {
		t.Fatal(err)
	}
	id := u.Info().ID
	u.Release()
	return id
}

// TestPartialsBounded: a client creating uploads in a loop (issue 23's
// tus reset flood left 21,775 partials in 35 s, kept for a day) cannot
// grow the store beyond DefaultMaxPartials: each new upload beyond it
// evicts the partial idle the longest (files too), never one being
// written, and the rest stay resumable.
func TestPartialsBounded(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	ids := make([]string, 0, DefaultMaxPartials+3)
	for i := range DefaultMaxPartials {
		ids = append(ids, beginIdle(t, s, fmt.Sprintf("p%05d", i)))
	}
	if n := s.Partials(); n != DefaultMaxPartials {
		t.Fatalf("%d partials before the bound, want %d", n, DefaultMaxPartials)
	}
	// The oldest is being written again: it is not the one evicted.
	busy, err := s.Acquire(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ids = append(ids, beginIdle(t, s, fmt.Sprintf("new%d", i)))
	}
	if n := s.Partials(); n != DefaultMaxPartials {
		t.Errorf("%d partials after 3 more, want the bound %d", n, DefaultMaxPartials)
	}
	if got := s.Stats.Evicted.Load(); got != 3 {
		t.Errorf("evicted %d, want 3", got)
	}
	for i, want := range map[int]error{0: nil, 1: xfer.ErrNotFound, 2: xfer.ErrNotFound, 3: xfer.ErrNotFound, 4: nil} {
		if _, err := s.StatID(ids[i]); !errors.Is(err, want) {
			t.Errorf("upload %d: StatID = %v, want %v", i, err, want)
		}
	}
	for _, id := range ids[len(ids)-3:] {
		if _, err := s.StatID(id); err != nil {
			t.Errorf("a new upload %s: %v", id, err)
		}
	}
	if n := len(partialFiles(t, dir)); n != 2*DefaultMaxPartials {
		t.Errorf("%d files in .partial, want %d (data and sidecar of each kept partial)", n, 2*DefaultMaxPartials)
	}
	busy.Release()
	// The one written again went to the back: the next eviction takes
	// the longest idle, upload 4.
	beginIdle(t, s, "last")
	if _, err := s.StatID(ids[0]); err != nil {
		t.Errorf("the partial written last-but-one was evicted: %v", err)
	}
	if _, err := s.StatID(ids[4]); !errors.Is(err, xfer.ErrNotFound) {
		t.Errorf("the longest idle partial was kept: %v", err)
	}
}

// TestPartialsAllBusy: with every partial being written, a new upload is
// refused (ErrNoSpace, a tus 507) rather than evicting a writer's. The
// bound is lowered only to hold that many writers open in a test.
func TestPartialsAllBusy(t *testing.T) {
	s := openT(t, t.TempDir(), Options{MaxPartials: 2})
	for i := range 2 {
		u, err := s.BeginKept(fmt.Sprintf("w%d", i), 10, nil, "", true)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Release()
	}
	if _, err := s.BeginKept("third", 10, nil, "", true); !errors.Is(err, xfer.ErrNoSpace) {
		t.Fatalf("a third upload with two being written: %v, want ErrNoSpace", err)
	}
}

// TestBoundAtRecovery: a server restarted with a lower bound keeps the
// partials updated last and the finished records finished last.
func TestBoundAtRecovery(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	s := openT(t, dir, Options{Now: clock})
	var ids []string
	for i := range 4 {
		now = now.Add(time.Second)
		ids = append(ids, beginIdle(t, s, fmt.Sprintf("r%d", i)))
	}
	var done []string
	for i := range 3 {
		now = now.Add(time.Second)
		p := []byte(fmt.Sprintf("file %d", i))
		u, err := s.BeginKept(fmt.Sprintf("f%d", i), int64(len(p)), nil, "", true)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, u, p, 0, len(p))
		if _, err := u.Finish(nil, "test"); err != nil {
			t.Fatal(err)
		}
		done = append(done, u.Info().ID)
		u.Release()
	}
	s.Close()
	s = openT(t, dir, Options{Now: clock, MaxPartials: 2})
	for i, id := range append(ids, done...) {
		_, err := s.StatID(id)
		kept := i == 2 || i == 3 || i == 5 || i == 6
		if (err == nil) != kept {
			t.Errorf("upload %d after a restart with a bound of 2: StatID = %v, want kept %v", i, err, kept)
		}
	}
	if n := len(partialFiles(t, dir)); n != 2*2+2 {
		t.Errorf("%d files in .partial, want 6 (two partials' data and sidecar, two finished records)", n)
	}
}

// TestFinishedRecordsBounded: the records of finished tus uploads (HEAD
// answers them until --expire) are bounded too; the oldest goes, its file
// stays landed.
func TestFinishedRecordsBounded(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{MaxPartials: 2})
	var ids []string
	for i := range 3 {
		p := []byte("x")
		u, err := s.BeginKept(fmt.Sprintf("d%d", i), 1, nil, "", true)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, u, p, 0, 1)
		if _, err := u.Finish(nil, "test"); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.Info().ID)
		u.Release()
	}
	if _, err := s.StatID(ids[0]); !errors.Is(err, xfer.ErrNotFound) {
		t.Errorf("the oldest finished record was kept: %v", err)
	}
	for _, id := range ids[1:] {
		if in, err := s.StatID(id); err != nil || !in.Finished {
			t.Errorf("finished record %s: %+v, %v", id, in, err)
		}
	}
	if _, err := s.Stat("d0"); !errors.Is(err, xfer.ErrNotFound) {
		t.Errorf("d0 still a partial: %v", err)
	}
}

// blockingRemoveFS holds the first Remove of a file ending in suffix until
// release is closed, telling on removing that it got there.
type blockingRemoveFS struct {
	seglog.FS
	suffix   string
	once     sync.Once
	removing chan struct{}
	release  chan struct{}
}

func (f *blockingRemoveFS) Remove(name string) error {
	if strings.HasSuffix(name, f.suffix) {
		held := false
		f.once.Do(func() { held = true })
		if held {
			close(f.removing)
			<-f.release
		}
	}
	return f.FS.Remove(name)
}

// An eviction unlinks the evicted partial's files after the store's lock
// is let go: the other uploads' calls do not wait for the filesystem.
// Before, Begin removed them under s.mu, and StatID below waited for the
// held Remove (the test's bound ran out).
func TestEvictionRemovesFilesOutsideTheStoreLock(t *testing.T) {
	fsys := &blockingRemoveFS{FS: seglog.OSFS(), suffix: ".part", removing: make(chan struct{}), release: make(chan struct{})}
	s := openT(t, t.TempDir(), Options{MaxPartials: 2, FS: fsys})
	beginIdle(t, s, "a")
	kept := beginIdle(t, s, "b")
	began := make(chan error, 1)
	go func() {
		u, err := s.Begin("c", 1<<20, nil, "", true) // evicts "a"
		if err == nil {
			u.Release()
		}
		began <- err
	}()
	<-fsys.removing
	var statErr atomic.Pointer[error]
	go func() {
		_, err := s.StatID(kept)
		statErr.Store(&err)
	}()
	if !testwait.Until(func() bool { return statErr.Load() != nil }) {
		t.Error("StatID waited for the evicted partial's Remove: the store's lock is held while unlinking")
	} else if err := *statErr.Load(); err != nil {
		t.Errorf("StatID of a kept partial while an eviction unlinks: %v", err)
	}
	close(fsys.release)
	if err := <-began; err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if got := s.Stats.Evicted.Load(); got != 1 {
		t.Errorf("evicted %d, want 1", got)
	}
}

// A new upload that replaces an idle partial of the same name finds that
// partial's bytes free: on a disk with room for one of them, the second
// begins (its files are removed before the free-space check, not after
// the store's lock is let go as an eviction's are).
func TestReplacedPartialsSpaceIsFree(t *testing.T) {
	const size = 1 << 20
	disk := testfs.New(size + size/2)
	s := openT(t, t.TempDir(), Options{FS: disk, FreeSpace: func(string) (int64, error) { return disk.Free(), nil }})
	u, err := s.Begin("x", size, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte{7}, size-1)
	if _, err := u.Write(0, p, xfer.CRC32C(p)); err != nil {
		t.Fatal(err)
	}
	u.Release()
	u, err = s.Begin("x", size, nil, "", true) // fresh: replaces the partial
	if err != nil {
		t.Fatalf("a new upload replacing the only partial on a disk with room for one: %v", err)
	}
	u.Release()
}
