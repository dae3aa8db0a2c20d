package diskstore

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/seglog"
)

// PartialDir is the directory under DIR that holds partial uploads.
const PartialDir = ".partial"

// Options configure an Uploads. Zero values take the defaults.
type Options struct {
	// MaxSize refuses uploads larger than this (0: no limit).
	MaxSize int64
	// Expire removes partial uploads idle for longer, and the records of
	// finished uploads (BeginKept) this long after they finished (0: never).
	Expire time.Duration
	// SyncEvery is how many bytes an upload may receive between two
	// durable checkpoints (fsync of the data, then of the sidecar). A
	// server crash loses at most this much of an upload. Default 16 MiB.
	SyncEvery int64
	// SyncInterval also checkpoints an upload that received bytes this
	// long after its last checkpoint, so a slow upload does not lose more
	// than this much time's worth to a crash. Default 1s.
	SyncInterval time.Duration
	// Reserve is free space kept on the disk beyond an upload's size.
	Reserve int64
	// BufferBytes bounds the memory of the blocks (1 MiB each) that all
	// uploads of the store, over every transport, gather their bytes in
	// before they are written and hashed; an upload that finds it spent
	// writes and hashes each chunk (or 64 KiB of a body) before it reads
	// the next. Default DefaultBufferBytes.
	BufferBytes int64
	// IdleTimeout ends a tus PATCH whose body sends nothing for this long
	// (a frozen or vanished client), so that its upload is free again.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxPartials bounds the partial uploads kept (a new one beyond it
	// evicts the one idle the longest), and the records of finished
	// uploads kept (BeginKept; the oldest goes). Default
	// DefaultMaxPartials (bound.go).
	MaxPartials int
	Log         *slog.Logger
	// Now and FreeSpace replace the clock and statfs in tests.
	Now       func() time.Time
	FreeSpace func(dir string) (int64, error)
	// FS is the filesystem every file of the store is created, written,
	// synced, renamed, read and removed through: the operating system's
	// by default (seglog.OSFS). Tests give a small disk anywhere
	// (internal/testkit/testfs's byte budget) or inject failures; an object-store
	// backend is another xfer.Backend, not another FS. DIR's lock
	// (.partial/LOCK) is always the operating system's.
	FS seglog.FS
}

// DefaultIdleTimeout is Options.IdleTimeout's default: tusd's network
// timeout, long enough for a slow link to deliver some bytes.
const DefaultIdleTimeout = 60 * time.Second

// Uploads keeps the uploads of one directory.
type Uploads struct {
	dir, partial string
	// partialInfo is partial's identity at Open (Ready).
	partialInfo os.FileInfo
	o           Options
	lock        *dirlock.Lock
	log         *slog.Logger
	Stats       xfer.Stats
	bufs        *bufferBudget

	mu     sync.Mutex
	byID   map[string]*Upload
	byName map[string]*Upload
	// idle orders the idle partials by when they were let go (bound.go).
	idle list.List
	// done holds the finished uploads begun with BeginKept (elements of
	// doneOrder, whose values are *xfer.Finished), by id, until they
	// expire (finished.go) or the bound evicts them (bound.go).
	done      map[string]*list.Element
	doneOrder list.List
	// recoveredDone: the finished records Open found, until
	// orderRecovered puts them in order.
	recoveredDone []*xfer.Finished
	evictLog      logutil.Every
	closed        bool
	stopExp       chan struct{}
}

// Open opens (creating it if needed) the upload directory dir, locks it,
// recovers the partial uploads a previous server left and starts expiring
// idle ones.
func Open(dir string, o Options) (*Uploads, error) {
	if o.SyncEvery <= 0 {
		o.SyncEvery = 16 << 20
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FreeSpace == nil {
		o.FreeSpace = freeSpace
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.FS == nil {
		o.FS = seglog.OSFS()
	}
	if o.MaxPartials <= 0 {
		o.MaxPartials = DefaultMaxPartials
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = DefaultBufferBytes
	}
	if held, pid := dirlock.Held(dir); held {
		// A running agent's spool or sink's data: uploads named LOCK or
		// agent-id would replace its files (found by hand: a second agent
		// then started on the spool).
		return nil, fmt.Errorf("xfer: %s is in use by another sluice process (pid %d), a spool or a sink's data: give xfer serve a directory of its own", dir, pid)
	}
	partial := filepath.Join(dir, PartialDir)
	if err := o.FS.MkdirAll(partial, 0o755); err != nil {
		return nil, err
	}
	// The lock lives in .partial so that DIR's namespace is the uploads'.
	lock, err := dirlock.Acquire(partial, "upload directory")
	if err != nil {
		return nil, err
	}
	s := &Uploads{dir: dir, partial: partial, o: o, lock: lock, log: o.Log,
		byID: map[string]*Upload{}, byName: map[string]*Upload{}, done: map[string]*list.Element{}, stopExp: make(chan struct{})}
	s.partialInfo, _ = os.Stat(partial)
	s.bufs = newBufferBudget(o.BufferBytes, &s.Stats)
	if err := s.recover(); err != nil {
		lock.Release()
		return nil, err
	}
	s.orderRecovered()
	if o.Expire > 0 {
		go s.expireLoop()
	}
	return s, nil
}

// Dir is the directory completed uploads land in.
func (s *Uploads) Dir() string { return s.dir }

// Partials is the number of unfinished uploads the store holds: what a
// server started on the directory later resumes.
func (s *Uploads) Partials() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// MaxSize is the largest upload accepted (0: no limit).
func (s *Uploads) MaxSize() int64 { return s.o.MaxSize }

// IdleTimeout is how long a writer's body may send nothing.
func (s *Uploads) IdleTimeout() time.Duration { return s.o.IdleTimeout }

// Counters are the store's xfer.Stats.
func (s *Uploads) Counters() *xfer.Stats { return &s.Stats }

// ExpireAfter is how long an idle partial upload is kept (0: forever).
func (s *Uploads) ExpireAfter() time.Duration { return s.o.Expire }

// Close closes every partial upload (they stay on disk) and unlocks DIR.
func (s *Uploads) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stopExp)
	ups := make([]*Upload, 0, len(s.byID))
	for _, u := range s.byID {
		ups = append(ups, u)
	}
	s.mu.Unlock()
	for _, u := range ups {
		u.mu.Lock()
		u.closeFiles()
		u.mu.Unlock()
	}
	return s.lock.Release()
}

func (s *Uploads) paths(id string) (data, meta string) {
	return filepath.Join(s.partial, id+".part"), filepath.Join(s.partial, id+".meta")
}

// recover loads every partial upload: a data file is cut back to its
// sidecar's offset (bytes after it were never acknowledged as durable), a
// sidecar without a valid record restarts its upload from zero, leftovers
// of completed uploads are removed.
func (s *Uploads) recover() error {
	ents, err := s.o.FS.ReadDir(s.partial)
	if err != nil {
		return err
	}
	metas := map[string]bool{}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".meta"); ok {
			metas[id] = true
		}
		if id, ok := strings.CutSuffix(e.Name(), doneSuffix); ok {
			if f := s.loadFinished(id); f != nil {
				s.recoveredDone = append(s.recoveredDone, f)
			}
		}
		if strings.HasSuffix(e.Name(), doneSuffix+".tmp") {
			s.o.FS.Remove(filepath.Join(s.partial, e.Name()))
		}
	}
	for _, e := range ents {
		n := e.Name()
		if id, ok := strings.CutSuffix(n, ".part"); ok && !metas[id] {
			s.log.Warn("removing partial data without a sidecar", "file", n)
			s.o.FS.Remove(filepath.Join(s.partial, n))
		}
	}
	for id := range metas {
		u, err := s.load(id)
		if err != nil {
			return err
		}
		if u == nil {
			continue
		}
		if old := s.byName[u.rec.Name]; old != nil {
			// Two partials of one name (a crash while one replaced the
			// other): keep the newer.
			if old.rec.Updated.After(u.rec.Updated) {
				u.removeFiles()
				continue
			}
			old.removeFiles()
			delete(s.byID, old.rec.ID)
		}
		u.resumed = u.rec.Offset > 0 // it goes on after the restart
		s.byID[id] = u
		s.byName[u.rec.Name] = u
	}
	return nil
}

// load opens the partial upload id, or removes what cannot be resumed and
// returns nil. It fails only on I/O errors that leave the state unknown.
func (s *Uploads) load(id string) (*Upload, error) {
	dataPath, metaPath := s.paths(id)
	b, err := s.readFile(metaPath)
	if err != nil {
		return nil, err
	}
	rec, bad, derr := decodeSidecar(b)
	if err := s.exists(dataPath); errors.Is(err, fs.ErrNotExist) {
		// Renamed into place before the sidecar was removed, or lost:
		// nothing to resume either way.
		s.o.FS.Remove(metaPath)
		return nil, nil
	}
	if derr != nil {
		// Nothing says which bytes are durable or what their hash is:
		// restart the upload rather than wedge it. The name is unknown,
		// so the partial cannot be kept for it.
		s.log.Warn("partial upload's sidecar is unreadable; discarding it, the next upload of its name starts from zero", "id", id, "err", derr)
		s.Stats.Salvaged.Add(1)
		s.o.FS.Remove(dataPath)
		s.o.FS.Remove(metaPath)
		return nil, nil
	}
	if bad > 0 && rec.Seq > 0 {
		s.log.Info("partial upload's sidecar had a torn slot; resuming from the previous record", "id", id, "offset", rec.Offset)
		s.Stats.Salvaged.Add(1)
	}
	if rec.ID != id || xfer.ValidateName(rec.Name) != nil {
		s.log.Warn("partial upload's sidecar does not match its file; discarding", "id", id)
		s.o.FS.Remove(dataPath)
		s.o.FS.Remove(metaPath)
		return nil, nil
	}
	u := &Upload{s: s, name: rec.Name, rec: *rec}
	if err := u.openFiles(false); err != nil {
		return nil, err
	}
	size, err := u.data.Size()
	if err != nil {
		u.closeFiles()
		return nil, err
	}
	if size < rec.Offset {
		// The sidecar only moves after an fsync of the data, so this is
		// a file system that lost synced data: restart from zero.
		s.log.Warn("partial upload's data is shorter than its sidecar says; restarting it", "name", rec.Name, "have", size, "want", rec.Offset)
		s.Stats.Salvaged.Add(1)
		if err := u.resetLocked(); err != nil {
			u.closeFiles()
			return nil, err
		}
	}
	if err := u.restoreHash(); err != nil {
		s.log.Warn("partial upload's hash state is unreadable; restarting it", "name", rec.Name, "err", err)
		if err := u.resetLocked(); err != nil {
			u.closeFiles()
			return nil, err
		}
	}
	if err := u.data.Truncate(u.rec.Offset); err != nil {
		u.closeFiles()
		return nil, err
	}
	u.written = u.rec.Offset
	u.unverified = u.rec.Offset > 0
	u.closeFiles() // reopened by its next writer (reopen): an idle partial holds no descriptor
	u.slim()
	return u, nil
}

// readFile reads the whole file name through the store's filesystem.
func (s *Uploads) readFile(name string) ([]byte, error) {
	f, err := s.o.FS.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err == io.EOF && int64(n) == size {
		err = nil
	}
	return b[:n], err
}

// exists is nil when name exists (a fs.ErrNotExist error when not).
func (s *Uploads) exists(name string) error {
	f, err := s.o.FS.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// Stat describes the partial upload of name (xfer.ErrNotFound when none).
func (s *Uploads) Stat(name string) (xfer.Info, error) {
	s.mu.Lock()
	u := s.byName[name]
	s.mu.Unlock()
	if u == nil {
		return xfer.Info{}, xfer.ErrNotFound
	}
	s.verifyIdle(u)
	return u.Info(), nil
}

// StatID describes the upload with this id: a partial one, or a
// finished one begun with BeginKept that has not expired (xfer.Info.Finished).
// xfer.ErrNotFound when none.
func (s *Uploads) StatID(id string) (xfer.Info, error) {
	s.mu.Lock()
	u := s.byID[id]
	f := s.finishedLocked(id)
	s.mu.Unlock()
	if u != nil {
		s.verifyIdle(u)
		return u.Info(), nil
	}
	if f != nil {
		return f.Info(s.o.Expire), nil
	}
	return xfer.Info{}, xfer.ErrNotFound
}

// Begin returns the upload of name, acquired for writing (Release it):
// the existing partial when it has the same size (and the same expected
// SHA-256 when both have one) so the writer resumes at its Offset, else a
// new one that replaces an idle partial of that name. fresh always starts
// a new upload. A name being written by someone else gives a *xfer.BusyError.
//
// An empty name with fresh names the upload by its id (tus without a
// filename).
func (s *Uploads) Begin(name string, size int64, sha []byte, meta string, fresh bool) (xfer.BackendUpload, error) {
	return upload(verified(s.begin(name, size, sha, meta, fresh, false)))
}

// BeginKept is Begin for an upload whose description is kept once it is
// finished, until it expires (StatID, FinishedID, RemoveFinished): tus
// clients ask for an upload's offset again by its URL, and an upload
// they find gone is sent again whole.
func (s *Uploads) BeginKept(name string, size int64, sha []byte, meta string, fresh bool) (xfer.BackendUpload, error) {
	return upload(verified(s.begin(name, size, sha, meta, fresh, true)))
}

// upload is u as an xfer.BackendUpload: nil, not a nil *Upload, on error.
func upload(u *Upload, err error) (xfer.BackendUpload, error) {
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (s *Uploads) begin(name string, size int64, sha []byte, meta string, fresh, keep bool) (*Upload, error) {
	id := newID()
	if name == "" && fresh {
		name = id
	}
	if err := xfer.ValidateName(name); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("negative size %d", size)
	}
	if s.o.MaxSize > 0 && size > s.o.MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", xfer.ErrTooLarge, size, s.o.MaxSize)
	}
	if len(meta) > maxMeta {
		return nil, fmt.Errorf("metadata of %d bytes is longer than %d", len(meta), maxMeta)
	}
	if sha != nil && len(sha) != 32 {
		return nil, fmt.Errorf("sha256 of %d bytes, want 32", len(sha))
	}
	if err := s.notADirectory(name); err != nil {
		return nil, err
	}
	// Files of the partials this one evicts are removed after the store's
	// lock is let go (deferred calls run last in, first out): unlinking is
	// a filesystem call every other upload's Begin, Acquire and Release
	// would otherwise wait for, and a flood of new uploads evicts one per
	// request. (A partial of the same name that this one replaces is
	// removed before the free-space check, which must see its bytes
	// free: TestReplacedPartialsSpaceIsFree.)
	var evicted []*Upload
	defer func() { removeUploadFiles(evicted) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, xfer.ErrClosedStore
	}
	if old := s.byName[name]; old != nil {
		if old.active {
			return nil, &xfer.BusyError{Name: name}
		}
		if !fresh && old.rec.Size == size && (sha == nil || old.rec.SHA256 == nil || string(sha) == string(old.rec.SHA256)) {
			if err := s.checkSpace(size - old.rec.Offset); err != nil {
				return nil, err
			}
			old.takeLocked()
			if err := old.reopen(); err != nil {
				old.untakeLocked()
				return nil, err
			}
			old.resumed = old.resumed || old.rec.Offset > 0
			return old, nil
		}
		s.log.Info("a new upload replaces an idle partial of the same name", "name", name, "old_offset", old.rec.Offset)
		s.dropLocked(old)
		removeUploadFiles([]*Upload{old})
	}
	if err := s.checkSpace(size); err != nil {
		return nil, err
	}
	var err error
	if evicted, err = s.makeRoomLocked(); err != nil {
		return nil, err
	}
	now := s.o.Now()
	u := &Upload{s: s, name: name, rec: record{ID: id, Name: name, Size: size, SHA256: sha, Meta: meta, Keep: keep, Created: now, Updated: now}}
	u.takeLocked()
	if err := u.create(); err != nil {
		return nil, err
	}
	s.byID[u.rec.ID] = u
	s.byName[name] = u
	return u, nil
}

// Acquire takes the upload id for writing (Release it). When someone
// writes it already, that writer is asked to stop (OnTakeover) and
// Acquire waits for it to let go: a request for an upload by its id comes
// from the client that created it, so the writer still holding it is that
// client's earlier connection, frozen or gone without a FIN (tusd does
// the same). A *xfer.BusyError when the writer cannot be interrupted or does
// not let go in time, or ctx ends.
func (s *Uploads) Acquire(ctx context.Context, id string) (xfer.BackendUpload, error) {
	return upload(verified(s.acquire(ctx, id)))
}

func (s *Uploads) acquire(ctx context.Context, id string) (*Upload, error) {
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		u := s.byID[id]
		if u == nil {
			s.mu.Unlock()
			return nil, xfer.ErrNotFound
		}
		if !u.active {
			u.takeLocked()
			err := u.reopen()
			if err != nil {
				u.untakeLocked()
			}
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return u, nil
		}
		interrupt, released := u.interrupt, u.released
		s.mu.Unlock()
		if interrupt == nil || attempt == 2 {
			return nil, &xfer.BusyError{Name: u.name}
		}
		s.log.Info("a new request for an upload interrupts its writer", "name", u.name, "id", id)
		s.Stats.TakenOver.Add(1)
		s.mu.Lock()
		u.resumed = true
		s.mu.Unlock()
		interrupt()
		if err := xfer.AwaitRelease(ctx, released, u.name); err != nil {
			return nil, err
		}
	}
}

// checkSpace refuses an upload that needs more than the free space.
func (s *Uploads) checkSpace(need int64) error {
	free, err := s.o.FreeSpace(s.partial)
	if err != nil {
		return nil // an unknown free space is found out by the writes
	}
	if free < need+s.o.Reserve {
		return fmt.Errorf("%w: %d bytes needed, %d free in %s", xfer.ErrNoSpace, need, free, s.dir)
	}
	return nil
}

func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Expire removes the partial uploads idle since before now-Expire and not
// being written, and the records of finished uploads (BeginKept) finished
// before then, and returns how many.
func (s *Uploads) Expire(now time.Time) int {
	if s.o.Expire <= 0 {
		return 0
	}
	s.mu.Lock()
	var gone []*Upload
	for _, u := range s.byID {
		if !u.active && expired(u.rec.Updated, s.o.Expire, now) {
			gone = append(gone, u)
			s.dropLocked(u)
		}
	}
	var goneDone []*xfer.Finished
	for e := s.doneOrder.Front(); e != nil; {
		f, next := e.Value.(*xfer.Finished), e.Next()
		if expired(f.Finished, s.o.Expire, now) {
			goneDone = append(goneDone, s.removeFinishedLocked(f.ID))
		}
		e = next
	}
	s.mu.Unlock()
	for _, u := range gone {
		s.log.Info("partial upload expired", "name", u.rec.Name, "offset", u.rec.Offset, "idle_since", u.rec.Updated)
	}
	removeUploadFiles(gone)
	for _, f := range goneDone {
		s.log.Info("finished upload's record expired", "name", f.Name, "id", f.ID, "finished", f.Finished)
	}
	s.removeFinishedFiles(goneDone)
	s.Stats.Expired.Add(int64(len(gone) + len(goneDone)))
	return len(gone) + len(goneDone)
}

func expired(updated time.Time, after time.Duration, now time.Time) bool {
	return after > 0 && now.Sub(updated) > after
}

func (s *Uploads) expireLoop() {
	xfer.RunExpiry(s.o.Expire, s.stopExp, func() { s.Expire(s.o.Now()) })
}

// forget drops u from the indexes (it completed or was terminated).
func (s *Uploads) forget(u *Upload) {
	s.mu.Lock()
	s.dropLocked(u)
	s.mu.Unlock()
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// notADirectory refuses a name that a directory holds in the store's
// directory: no upload of it can land (its rename fails every time).
// Before, the whole file was received and then refused, and the client,
// told "internal", sent its end again for a minute (found by hand,
// 2026-11-29).
func (s *Uploads) notADirectory(name string) error {
	// os.Stat, not Options.FS, which has no Stat: a test filesystem
	// (a byte budget) keeps the real directory tree.
	if fi, err := os.Stat(filepath.Join(s.dir, name)); err == nil && fi.IsDir() {
		return &xfer.NameError{Name: name, Why: "a directory holds it in " + s.dir + ": an upload of it cannot land"}
	}
	return nil
}

// Ready reports whether the store can take uploads: its directory is the
// one it opened and locked. Removed or replaced under a running server
// (rm -rf DIR), every upload failed while /readyz said ready, and a
// second server could start on a recreated DIR, the lock being on the
// deleted one (found by hand, 2026-11-29).
func (s *Uploads) Ready() error {
	fi, err := os.Stat(s.partial)
	if err != nil || s.partialInfo == nil || !os.SameFile(fi, s.partialInfo) {
		return fmt.Errorf("the upload directory %s is gone or was replaced since xfer serve opened it: restart xfer serve", s.dir)
	}
	return nil
}
