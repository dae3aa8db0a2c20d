package s3store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/xfer"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// PartSize is the size of the parts an upload is sent to the store
	// in, and so its memory: up to partsInFlight+1 part buffers per
	// upload being written.
	// At least 5 MiB (S3's smallest part), raised for an upload that
	// would need more than 10,000 parts. Default DefaultPartSize.
	PartSize int64
	// MaxSize refuses uploads larger than this (0: no limit).
	MaxSize int64
	// Expire aborts the multipart uploads idle for longer, and removes the
	// records of finished tus uploads this long after they finished (0: never).
	Expire time.Duration
	// IdleTimeout ends a tus PATCH whose body sends nothing for this long.
	// Default 60 s, as the disk store's.
	IdleTimeout time.Duration
	// LeaseTTL is how long a writer's hold on an upload lasts without
	// renewal (it is renewed as the upload goes on): how long a server
	// killed mid-upload keeps the other servers from resuming it.
	// Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// OpTimeout bounds each request to the store. Default 2 min.
	OpTimeout time.Duration
	Log       *slog.Logger
	// Now replaces the clock in tests.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultPartSize = 8 << 20
	DefaultLeaseTTL = 15 * time.Second
	// maxMeta bounds an upload's metadata (tus Upload-Metadata).
	maxMeta = 64 << 10
)

// Store keeps uploads in one bucket under one prefix. Several Stores, in
// several processes, may share a location: each upload is written by one
// of them at a time (the lease), and any of them resumes it.
type Store struct {
	loc   Location
	c     *s3.Client
	o     Options
	log   *slog.Logger
	Stats xfer.Stats
	// server identifies this Store in its leases: an upload whose lease
	// it left behind (a writer whose release failed) it takes back at once.
	server string

	mu      sync.Mutex
	held    map[string]*Upload // by id: the uploads a writer of this Store holds
	closed  bool
	stopExp chan struct{}
}

// Open checks that the bucket of loc answers and takes writes with the
// client's credentials (a clear ErrDenied otherwise), and starts expiring
// idle uploads when o.Expire is set.
func Open(loc Location, c *s3.Client, o Options) (*Store, error) {
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	o.PartSize = max(o.PartSize, minPart)
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Store{loc: loc, c: c, o: o, log: o.Log, server: newID()[:12], held: map[string]*Upload{}, stopExp: make(chan struct{})}
	ctx, cancel := s.opCtx()
	defer cancel()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &loc.Bucket}); err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("opening %s: %w: bucket %q does not exist", loc, ErrDenied, loc.Bucket)
		}
		return nil, classify("opening "+loc.String(), err)
	}
	// A write and a delete, so that read-only credentials fail here and
	// not at the first upload's first part.
	probe := loc.Prefix + stateDir + "probe-" + s.server
	if _, err := s.put(ctx, probe, nil, cond{}); err != nil {
		return nil, classify("writing to "+loc.String(), err)
	}
	if err := s.del(ctx, probe); err != nil {
		return nil, classify("deleting in "+loc.String(), err)
	}
	if o.Expire > 0 {
		go s.expireLoop()
	}
	return s, nil
}

func (s *Store) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.o.OpTimeout)
}

// Location is where the store keeps its uploads.
func (s *Store) Location() Location { return s.loc }

// MaxSize is the largest upload accepted (0: no limit).
func (s *Store) MaxSize() int64 { return s.o.MaxSize }

// IdleTimeout is how long a writer's body may send nothing.
func (s *Store) IdleTimeout() time.Duration { return s.o.IdleTimeout }

// Counters are the store's xfer.Stats.
func (s *Store) Counters() *xfer.Stats { return &s.Stats }

// Close stops expiring; uploads stay in the store for any server.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.stopExp)
	}
	return nil
}

func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// validID refuses an id that could address another key than an upload's.
func validID(id string) bool {
	return id != "" && len(id) <= 64 && !strings.ContainsAny(id, "/.\\") && xfer.ValidateName(id) == nil
}

// Begin returns the upload of name, acquired for writing (Release it):
// the partial one of that name in the store, whichever server began it,
// when it has the same size (and SHA-256 when both have one), so the
// writer resumes at its Offset; else a new one. fresh always starts a new
// one. A name another writer holds gives a *xfer.BusyError.
func (s *Store) Begin(name string, size int64, sha []byte, meta string, fresh bool) (xfer.BackendUpload, error) {
	return upload(s.begin(&record{Name: name, Size: size, SHA256: sha, Meta: meta}, fresh))
}

// BeginKept is Begin for an upload whose record is kept once finished,
// until it expires (tus).
func (s *Store) BeginKept(name string, size int64, sha []byte, meta string, fresh bool) (xfer.BackendUpload, error) {
	return upload(s.begin(&record{Name: name, Size: size, SHA256: sha, Meta: meta, Keep: true}, fresh))
}

func upload(u *Upload, err error) (xfer.BackendUpload, error) {
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (s *Store) checkBegin(name string, size int64, sha []byte, meta string) error {
	if err := xfer.ValidateName(name); err != nil {
		return err
	}
	switch {
	case size < 0:
		return fmt.Errorf("negative size %d", size)
	case s.o.MaxSize > 0 && size > s.o.MaxSize:
		return fmt.Errorf("%w: %d bytes, the limit is %d", xfer.ErrTooLarge, size, s.o.MaxSize)
	case len(meta) > maxMeta:
		return fmt.Errorf("metadata of %d bytes is longer than %d", len(meta), maxMeta)
	case sha != nil && len(sha) != 32:
		return fmt.Errorf("sha256 of %d bytes, want 32", len(sha))
	case size > maxParts*partSizeFor(size, s.o.PartSize):
		return fmt.Errorf("%w: %d bytes is more than S3's %d parts hold", xfer.ErrTooLarge, size, maxParts)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return xfer.ErrClosedStore
	}
	for _, u := range s.held {
		if u.rec.Name == name {
			return &xfer.BusyError{Name: name}
		}
	}
	return nil
}

// begin starts or resumes the upload want describes (its Name, Size,
// SHA256, Meta, Keep, Partial, Parts).
func (s *Store) begin(want *record, fresh bool) (*Upload, error) {
	id := newID()
	name, size, sha := want.Name, want.Size, want.SHA256
	if name == "" && fresh {
		name = id
	}
	if err := s.checkBegin(name, size, sha, want.Meta); err != nil {
		return nil, err
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	old, err := s.partialOf(ctx, name)
	if err != nil {
		return nil, err
	}
	if old != nil {
		rec := old.rec
		if !fresh && rec.Size == size && (sha == nil || rec.SHA256 == nil || string(sha) == string(rec.SHA256)) {
			return s.take(ctx, old)
		}
		// A new upload replaces the idle partial of the name: unless a
		// writer holds it.
		u, err := s.take(ctx, old)
		if err != nil {
			return nil, err
		}
		s.log.Info("a new upload replaces an idle partial of the same name", "name", name, "old_offset", old.offset)
		u.Remove()
		u.Release()
	}
	rec := *want
	rec.ID, rec.Name = id, name
	return s.create(ctx, &rec)
}

// create starts a new multipart upload for rec (its ID, Name, Size,
// SHA256, Meta, Keep, Partial, Parts set) and its state objects.
func (s *Store) create(ctx context.Context, rec *record) (*Upload, error) {
	id, name := rec.ID, rec.Name
	key := s.objKey(rec)
	out, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.loc.Bucket, Key: &key})
	if err != nil {
		return nil, classify("starting the multipart upload of "+name, err)
	}
	rec.Created, rec.UploadID, rec.PartSize = s.o.Now().UTC(), *out.UploadId, partSizeFor(rec.Size, s.o.PartSize)
	b, _ := json.Marshal(rec)
	if _, err := s.put(ctx, s.infoKey(id), b, cond{ifAbsent: true}); err != nil {
		s.abort(ctx, rec)
		return nil, classify("writing the upload's info", err)
	}
	if _, err := s.put(ctx, s.nameKey(name), []byte(id), cond{}); err != nil {
		s.abort(ctx, rec)
		s.delAll(ctx, s.upDir(id))
		return nil, classify("writing the upload's name", err)
	}
	return s.take(ctx, &state{rec: rec, updated: rec.Created})
}

func (s *Store) abort(ctx context.Context, r *record) error {
	key := s.objKey(r)
	_, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.loc.Bucket, Key: &key, UploadId: &r.UploadID})
	if err != nil && !notFound(err) {
		return err
	}
	return nil
}

// partialOf is the state of the partial upload of name (nil: none).
func (s *Store) partialOf(ctx context.Context, name string) (*state, error) {
	o, err := s.get(ctx, s.nameKey(name))
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("looking up the upload of "+name, err)
	}
	id := string(o.body)
	if !validID(id) {
		return nil, nil
	}
	st, err := s.load(ctx, id)
	// A partial upload (tus concatenation) is named by its id only so
	// that it has a name; an upload of a file of that name is not it.
	if errors.Is(err, xfer.ErrNotFound) || st != nil && (st.rec.Name != name || st.rec.Partial) {
		return nil, nil
	}
	return st, err
}

// take makes the caller the writer of the upload st describes: the
// lease in the store, then this Store's index.
func (s *Store) take(ctx context.Context, st *state) (*Upload, error) {
	s.mu.Lock()
	if s.held[st.rec.ID] != nil {
		s.mu.Unlock()
		return nil, &xfer.BusyError{Name: st.rec.Name}
	}
	if s.closed {
		s.mu.Unlock()
		return nil, xfer.ErrClosedStore
	}
	u := &Upload{s: s, rec: st.rec, owner: s.server + "/" + newID()[:12], active: true, released: make(chan struct{})}
	s.held[st.rec.ID] = u // reserved while the lease is taken
	s.mu.Unlock()
	if err := u.takeLease(ctx); err != nil {
		s.drop(u)
		return nil, err
	}
	u.restore(st)
	return u, nil
}

func (s *Store) drop(u *Upload) {
	s.mu.Lock()
	if s.held[u.rec.ID] == u {
		delete(s.held, u.rec.ID)
	}
	s.mu.Unlock()
}

// Stat describes the partial upload of name (xfer.ErrNotFound when none).
func (s *Store) Stat(name string) (xfer.Info, error) {
	ctx, cancel := s.opCtx()
	defer cancel()
	st, err := s.partialOf(ctx, name)
	if err != nil {
		return xfer.Info{}, err
	}
	if st == nil {
		return xfer.Info{}, xfer.ErrNotFound
	}
	return s.statInfo(ctx, st), nil
}

// StatID describes the upload id, partial or finished (xfer.ErrNotFound).
func (s *Store) StatID(id string) (xfer.Info, error) {
	if !validID(id) {
		return xfer.Info{}, xfer.ErrNotFound
	}
	s.mu.Lock()
	u := s.held[id]
	s.mu.Unlock()
	if u != nil && u.ready() {
		return u.Info(), nil
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	st, err := s.load(ctx, id)
	if err == nil {
		return s.statInfo(ctx, st), nil
	}
	if !errors.Is(err, xfer.ErrNotFound) {
		return xfer.Info{}, err
	}
	o, err := s.get(ctx, s.doneKey(id))
	if notFound(err) {
		return xfer.Info{}, xfer.ErrNotFound
	}
	if err != nil {
		return xfer.Info{}, classify("reading a finished upload's record", err)
	}
	var f xfer.Finished
	if json.Unmarshal(o.body, &f) != nil || f.ID != id {
		return xfer.Info{}, xfer.ErrNotFound
	}
	return f.Info(s.o.Expire), nil
}

// statInfo is the Info of st, Active when some writer's lease is live.
func (s *Store) statInfo(ctx context.Context, st *state) xfer.Info {
	in := st.info(s.o.Expire)
	if l, _, err := s.readLease(ctx, st.rec.ID); err == nil && l != nil && l.Until.After(s.o.Now()) {
		in.Active = true
	}
	return in
}

// RemoveFinished forgets the finished upload id (false: none).
func (s *Store) RemoveFinished(id string) bool {
	if !validID(id) {
		return false
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	if _, err := s.get(ctx, s.doneKey(id)); err != nil {
		return false
	}
	return s.del(ctx, s.doneKey(id)) == nil
}

// Acquire takes the upload id for writing (Release it). A writer of this
// Store that holds it is asked to stop (OnTakeover) and Acquire waits for
// it to let go, as the disk store does; a writer on another server is not
// interrupted: *xfer.BusyError until its lease ends.
func (s *Store) Acquire(ctx context.Context, id string) (xfer.BackendUpload, error) {
	return upload(s.acquire(ctx, id))
}

func (s *Store) acquire(ctx context.Context, id string) (*Upload, error) {
	if !validID(id) {
		return nil, xfer.ErrNotFound
	}
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		u := s.held[id]
		var interrupt func()
		var released chan struct{}
		if u != nil {
			interrupt, released = u.interrupt, u.released
		}
		s.mu.Unlock()
		if u == nil {
			break
		}
		if interrupt == nil || attempt == 2 {
			return nil, &xfer.BusyError{Name: u.rec.Name}
		}
		s.log.Info("a new request for an upload interrupts its writer", "name", u.rec.Name, "id", id)
		s.Stats.TakenOver.Add(1)
		interrupt()
		if err := xfer.AwaitRelease(ctx, released, u.rec.Name); err != nil {
			return nil, err
		}
	}
	octx, cancel := s.opCtx()
	defer cancel()
	st, err := s.load(octx, id)
	if err != nil {
		return nil, err
	}
	return s.take(octx, st)
}
