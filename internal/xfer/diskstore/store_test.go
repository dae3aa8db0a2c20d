package diskstore

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
)

func openT(t *testing.T, dir string, o Options) *Uploads {
	t.Helper()
	return xfertest.Open(t, func() (*Uploads, error) { return Open(dir, o) })
}

// writeAll writes data[from:] in chunks of n.
func writeAll(t *testing.T, u xfer.BackendUpload, data []byte, from, n int) {
	t.Helper()
	for off := from; off < len(data); off += n {
		p := data[off:min(len(data), off+n)]
		if _, err := u.Write(int64(off), p, xfer.CRC32C(p)); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
}

// partialFiles lists DIR/.partial without the lock file.
func partialFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(dir, PartialDir))
	var names []string
	for _, e := range ents {
		if e.Name() != dirlock.FileName {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

func TestCompleteUploadLandsAtomically(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SyncEvery: 1000})
	data := xfertest.RandBytes(10_000, 1)
	want := sha256.Sum256(data)
	u, err := s.Begin("f.bin", int64(len(data)), want[:], "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, u, data, 0, 777)
	if _, err := os.Stat(filepath.Join(dir, "f.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DIR/NAME exists before Finish: %v", err)
	}
	sum, err := u.Finish(want[:], "test")
	if err != nil {
		t.Fatal(err)
	}
	u.Release()
	if !bytes.Equal(sum, want[:]) {
		t.Fatalf("sum %x, want %x", sum, want)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "f.bin"))
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	if p := partialFiles(t, dir); len(p) != 0 {
		t.Fatalf("partial files left: %v", p)
	}
	if _, err := s.Stat("f.bin"); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatalf("Stat after completion: %v", err)
	}
}

func TestEmptyUpload(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	u, err := s.Begin("empty", 0, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Finish(nil, "test"); err != nil {
		t.Fatal(err)
	}
	u.Release()
	if st, err := os.Stat(filepath.Join(dir, "empty")); err != nil || st.Size() != 0 {
		t.Fatalf("%v %v", st, err)
	}
}

// A server that dies between checkpoints resumes from the last one: the
// bytes after it (even garbage a crash left) are cut off.
func TestResumeAfterCrash(t *testing.T) {
	dir := t.TempDir()
	data := xfertest.RandBytes(50_000, 2)
	s, err := Open(dir, Options{SyncEvery: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Begin("f", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, u, data[:25_000], 0, 1000) // checkpoints at 10k and 20k
	// Crash: no Release; the data file also got bytes past the offset.
	s.Close()
	f, _ := os.OpenFile(filepath.Join(dir, PartialDir, u.Info().ID+".part"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("garbage after a crash"))
	f.Close()

	s2 := openT(t, dir, Options{})
	in, err := s2.Stat("f")
	if err != nil || in.Offset != 20_000 {
		t.Fatalf("after restart: %+v %v, want offset 20000", in, err)
	}
	u2, err := s2.Begin("f", int64(len(data)), nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if u2.Offset() != 20_000 {
		t.Fatalf("resume offset %d", u2.Offset())
	}
	writeAll(t, u2, data, 20_000, 4096)
	want := sha256.Sum256(data)
	if _, err := u2.Finish(want[:], "test"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "f"))
	if !bytes.Equal(got, data) {
		t.Fatal("content differs after resume")
	}
}

func TestReleaseCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	data := xfertest.RandBytes(3000, 3)
	u, _ := s.Begin("f", 3000, nil, "", false)
	writeAll(t, u, data[:1234], 0, 100)
	u.Release()
	if in, _ := s.Stat("f"); in.Offset != 1234 || in.Active {
		t.Fatalf("%+v", in)
	}
}

func TestChunkRefusals(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	u, _ := s.Begin("f", 10, nil, "", false)
	p := []byte("hello")
	if _, err := u.Write(0, p, xfer.CRC32C(p)^1); !errors.Is(err, xfer.ErrChecksum) {
		t.Fatalf("bad crc: %v", err)
	}
	if u.Offset() != 0 || s.Stats.ChunksRejected.Load() != 1 {
		t.Fatalf("offset %d after a refused chunk", u.Offset())
	}
	if _, err := u.Write(0, p, xfer.CRC32C(p)); err != nil {
		t.Fatal(err)
	}
	var oe *xfer.OffsetError
	if _, err := u.Write(0, p, xfer.CRC32C(p)); !errors.As(err, &oe) || oe.Have != 5 {
		t.Fatalf("replayed chunk: %v", err)
	}
	long := []byte("world!")
	if _, err := u.Write(5, long, xfer.CRC32C(long)); !errors.Is(err, xfer.ErrOverSize) {
		t.Fatalf("past the size: %v", err)
	}
	if _, err := u.Finish(nil, "test"); !errors.Is(err, xfer.ErrIncomplete) {
		t.Fatalf("finish early: %v", err)
	}
}

func TestBeginRefusals(t *testing.T) {
	dir := t.TempDir()
	free := int64(1 << 20)
	s := openT(t, dir, Options{MaxSize: 100 << 20, FreeSpace: func(string) (int64, error) { return free, nil }})
	if _, err := s.Begin("../etc/passwd", 1, nil, "", false); !errors.Is(err, xfer.ErrBadName) {
		t.Fatalf("traversal: %v", err)
	}
	if _, err := s.Begin("big", 200<<20, nil, "", false); !errors.Is(err, xfer.ErrTooLarge) {
		t.Fatalf("max size: %v", err)
	}
	if _, err := s.Begin("big", 2<<20, nil, "", false); !errors.Is(err, xfer.ErrNoSpace) {
		t.Fatalf("free space: %v", err)
	}
	u, err := s.Begin("same", 10, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Begin("same", 10, nil, "", false)
	if !errors.Is(err, xfer.ErrBusy) || err.Error() != "upload of same already in progress" {
		t.Fatalf("second writer: %v", err)
	}
	if _, err := s.Acquire(context.Background(), u.Info().ID); !errors.Is(err, xfer.ErrBusy) {
		t.Fatalf("acquire while busy: %v", err)
	}
	u.Release()
	u2, err := s.Acquire(context.Background(), u.Info().ID)
	if err != nil {
		t.Fatal(err)
	}
	u2.Release()
	if ents, _ := os.ReadDir(filepath.Dir(dir)); len(ents) != 1 {
		t.Fatalf("something was written next to DIR: %v", ents)
	}
}

// A new upload of a name whose idle partial has another size replaces it;
// the same size resumes it.
func TestBeginReplacesOrResumes(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	u, _ := s.Begin("f", 100, nil, "", false)
	writeAll(t, u, xfertest.RandBytes(50, 4), 0, 50)
	id := u.Info().ID
	u.Release()
	u, _ = s.Begin("f", 100, nil, "", false)
	if u.Info().ID != id || u.Offset() != 50 {
		t.Fatalf("same size did not resume: %s %d", u.Info().ID, u.Offset())
	}
	u.Release()
	u, _ = s.Begin("f", 200, nil, "", false)
	if u.Info().ID == id || u.Offset() != 0 {
		t.Fatal("another size did not restart")
	}
	u.Release()
	if p := partialFiles(t, dir); len(p) != 2 {
		t.Fatalf("old partial not removed: %v", p)
	}
}

func TestHashMismatchDiscards(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	data := xfertest.RandBytes(100, 5)
	u, _ := s.Begin("f", 100, nil, "", false)
	writeAll(t, u, data, 0, 100)
	wrong := sha256.Sum256([]byte("other"))
	if _, err := u.Finish(wrong[:], "test"); !errors.Is(err, xfer.ErrChecksum) {
		t.Fatalf("INVARIANT checksum: Finish with a SHA-256 that does not match the bytes returned %v, want ErrChecksum", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a mismatching upload landed")
	}
	if p := partialFiles(t, dir); len(p) != 0 {
		t.Fatalf("%v", p)
	}
}

func TestExpire(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := openT(t, dir, Options{Expire: time.Hour, Now: func() time.Time { return now }})
	u, _ := s.Begin("idle", 10, nil, "", false)
	u.Release()
	busy, _ := s.Begin("busy", 10, nil, "", false)
	if n := s.Expire(now.Add(30 * time.Minute)); n != 0 {
		t.Fatalf("expired %d too early", n)
	}
	if n := s.Expire(now.Add(2 * time.Hour)); n != 1 {
		t.Fatalf("expired %d, want 1 (the busy one stays)", n)
	}
	if _, err := s.Stat("idle"); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatal("idle partial still there")
	}
	busy.Release()
	if p := partialFiles(t, dir); len(p) != 2 {
		t.Fatalf("%v", p)
	}
}

func TestDirLocked(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, dirlock.ErrBusy) {
		t.Fatalf("second server on one DIR: %v", err)
	}
}

func TestSidecarSlots(t *testing.T) {
	a := record{Seq: 3, ID: "x", Name: "n", Size: 10, Offset: 4, Hash: []byte{1}}
	b := a
	b.Seq, b.Offset = 4, 8
	ea, _ := a.encode()
	eb, _ := b.encode()
	file := append(append([]byte{}, eb...), ea...) // slot 0 holds seq 4
	r, bad, err := decodeSidecar(file)
	if err != nil || r.Offset != 8 || bad != 0 {
		t.Fatalf("%+v %d %v", r, bad, err)
	}
	file[100] ^= 0xff // tear the newest slot
	r, bad, err = decodeSidecar(file)
	if err != nil || r.Offset != 4 || bad != 1 {
		t.Fatalf("torn newest slot: %+v %d %v", r, bad, err)
	}
	file[slotSize+20] ^= 0xff
	if _, _, err := decodeSidecar(file); err == nil {
		t.Fatal("two torn slots decoded")
	}
	if _, _, err := decodeSidecar(file[:10]); err == nil {
		t.Fatal("short file decoded")
	}
	bogus := a
	bogus.Offset = 11
	eo, _ := bogus.encode()
	if _, err := decodeSlot(eo); err == nil {
		t.Fatal("offset past size accepted")
	}
}

// A torn sidecar is salvaged from the other slot; one with no valid slot
// is discarded and the name starts again from zero; neither wedges Open.
func TestCorruptSidecarOnDisk(t *testing.T) {
	dir := t.TempDir()
	data := xfertest.RandBytes(30_000, 6)
	s, _ := Open(dir, Options{SyncEvery: 10_000})
	u, _ := s.Begin("torn", int64(len(data)), nil, "", false)
	writeAll(t, u, data[:20_000], 0, 10_000) // checkpoints at 10k (seq 2) and 20k (seq 3)
	v, _ := s.Begin("gone", 10, nil, "", false)
	s.Close()
	meta := filepath.Join(dir, PartialDir, u.Info().ID+".meta")
	f, _ := os.OpenFile(meta, os.O_WRONLY, 0)
	f.WriteAt([]byte("torn!"), slotSize+50) // seq 3 is in slot 1
	f.Close()
	os.WriteFile(filepath.Join(dir, PartialDir, v.Info().ID+".meta"), []byte("not a sidecar"), 0o644)

	s2 := openT(t, dir, Options{})
	in, err := s2.Stat("torn")
	if err != nil || in.Offset != 10_000 {
		t.Fatalf("torn sidecar: %+v %v, want offset 10000", in, err)
	}
	if _, err := s2.Stat("gone"); !errors.Is(err, xfer.ErrNotFound) {
		t.Fatalf("unreadable sidecar kept: %v", err)
	}
	if s2.Stats.Salvaged.Load() != 2 {
		t.Fatalf("salvaged %d", s2.Stats.Salvaged.Load())
	}
	u2, _ := s2.Begin("torn", int64(len(data)), nil, "", false)
	writeAll(t, u2, data, 10_000, 3000)
	want := sha256.Sum256(data)
	if _, err := u2.Finish(want[:], "test"); err != nil {
		t.Fatal(err)
	}
}

type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestReadFrom(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	data := xfertest.RandBytes(1000, 7)
	u, _ := s.Begin("f", 1000, nil, "", false)
	h := sha1.New()
	bad := sha1.Sum([]byte("x"))
	if n, err := u.ReadFrom(0, bytes.NewReader(data[:400]), h, bad[:]); !errors.Is(err, xfer.ErrChecksum) || n != 0 {
		t.Fatalf("bad checksum: %d %v", n, err)
	}
	if u.Offset() != 0 {
		t.Fatal("a refused body was kept")
	}
	good := sha1.Sum(data[:400])
	if n, err := u.ReadFrom(0, bytes.NewReader(data[:400]), sha1.New(), good[:]); err != nil || n != 400 {
		t.Fatalf("%d %v", n, err)
	}
	// A body cut short without a checksum keeps what arrived.
	if n, err := u.ReadFrom(400, &failingReader{bytes.NewReader(data[400:700]), io.ErrClosedPipe}, nil, nil); !errors.Is(err, io.ErrClosedPipe) || n != 700 {
		t.Fatalf("cut body: %d %v", n, err)
	}
	if n, err := u.ReadFrom(700, bytes.NewReader(append(data[700:], 'x')), nil, nil); !errors.Is(err, xfer.ErrOverSize) || n != 700 {
		t.Fatalf("over size: %d %v", n, err)
	}
	if _, err := u.ReadFrom(700, bytes.NewReader(data[700:]), nil, nil); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if _, err := u.Finish(want[:], "test"); err != nil {
		t.Fatal(err)
	}
}

// The longest metadata accepted fits a sidecar slot, even in characters
// JSON would escape.
func TestLongMetadataFits(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	u, err := s.Begin(strings.Repeat("n", xfer.MaxNameLen), 1, nil, strings.Repeat("<&>", maxMeta/3), false)
	if err != nil {
		t.Fatal(err)
	}
	u.Release()
	if _, err := s.Begin("m", 1, nil, strings.Repeat("x", maxMeta+1), false); err == nil {
		t.Fatal("metadata over the limit accepted")
	}
}

// TestIdlePartialIsSlim: a released partial keeps neither its SHA-256
// state object nor its hasher's channel nor its released channel (its
// record has the hash state); the writer that resumes it, by name (Begin)
// or by id (Acquire, as tus does), gets it back and the landed file's
// SHA-256 is the whole file's. Before, an idle partial kept all three
// (765 bytes and 7 objects of heap each, BenchmarkIdlePartialHeap).
func TestIdlePartialIsSlim(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	data := xfertest.RandBytes(3<<20, 5) // three blocks: the hasher runs
	want := sha256.Sum256(data)
	third := len(data) / 3
	bu, err := s.BeginKept("f", int64(len(data)), want[:], "", false)
	if err != nil {
		t.Fatal(err)
	}
	u := bu.(*Upload)
	id := u.Info().ID
	idle := func(step string) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if u.hash != nil || u.hp.lag != nil || u.released != nil {
			t.Fatalf("%s: idle partial keeps hash %v, lag %v, released %v", step, u.hash != nil, u.hp.lag != nil, u.released != nil)
		}
	}
	writeAll(t, u, data[:third], 0, 64<<10)
	u.Release()
	idle("after the first writer")

	if bu, err = s.Begin("f", int64(len(data)), want[:], "", false); err != nil || bu.Offset() != int64(third) {
		t.Fatalf("resume by name: %v, offset %d", err, bu.Offset())
	}
	writeAll(t, bu, data[:2*third], third, 64<<10)
	bu.Release()
	idle("after the second writer")

	if bu, err = s.Acquire(context.Background(), id); err != nil || bu.Offset() != int64(2*third) {
		t.Fatalf("resume by id: %v, offset %d", err, bu.Offset())
	}
	writeAll(t, bu, data, 2*third, 64<<10)
	sum, err := bu.Finish(nil, "test")
	bu.Release()
	if err != nil || !bytes.Equal(sum, want[:]) {
		t.Fatalf("finish: %v, sha256 %x, want %x", err, sum, want)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("landed file: %v, %d bytes", err, len(got))
	}
}

// TestDirectoryNameRefused: a name a directory holds in the store's
// directory is refused when the upload begins (bad_name, which no client
// retries), and at the rename if the directory appeared meanwhile.
// Before, the whole file was received and its rename failed as
// "internal", which clients sent again for a minute (found by hand,
// 2026-11-29).
func TestDirectoryNameRefused(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin("d", 3, nil, "", false); !errors.Is(err, xfer.ErrBadName) {
		t.Fatalf("Begin of a directory's name: %v, want ErrBadName", err)
	}
	u, err := s.Begin("later", 3, nil, "", false)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, u, []byte("abc"), 0, 3)
	if err := os.Mkdir(filepath.Join(dir, "later"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Finish(nil, "test"); !errors.Is(err, xfer.ErrBadName) {
		t.Fatalf("Finish onto a directory: %v, want ErrBadName", err)
	}
	u.Release()
}

// TestReadyWhenDirGone: a store whose directory was removed, or removed
// and made again, under it is not ready (xfer serve's /readyz answers
// 503): every upload would fail, and the lock is on the old directory.
func TestReadyWhenDirGone(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	if err := s.Ready(); err != nil {
		t.Fatalf("a fresh store: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil {
		t.Fatal("ready with its directory removed")
	}
	if err := os.MkdirAll(filepath.Join(dir, PartialDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), "restart xfer serve") {
		t.Fatalf("ready with its directory made again: %v", err)
	}
}
