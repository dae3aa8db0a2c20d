// Package resumejournal is an RSocket resume store that survives the
// server process: sessions journaled in a seglog, resumed by the next
// server on the same directory (docs/rsocket-resume.md).
//
// Open a Store once per directory and pass it as
// rsocket.ResumeConfig.Store; the driver uses it through
// rsocket.ResumeStore and the optional rsocket.JournalingResumeStore and
// rsocket.RestoringResumeStore.
package resumejournal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/fields"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
	"github.com/sluicehq/sluice/seglog"
)

// Resume across a server restart. A Store keeps every resumable
// session's state in a seglog
// journal: a full image (conn.ResumeImage) when the session starts, then,
// before each batch of output goes to the socket, one record of what
// changed (positions, the frames sent since the last record, the open
// streams when they changed). The record is handed to the kernel before
// the batch is (SyncNone: a process crash, SIGKILL, loses nothing the
// peer saw; SyncInterval or SyncAlways for machine crashes), so the
// journal is never behind what the client saw. A restarted server reads
// the journal back and keeps each session dormant; a RESUME for one
// rebuilds it (conn.Restore) and resumes it as after a broken
// connection. A journal that is behind anyway (a failed write, a
// damaged record) is safe: positions the client is past make the
// restored session reject the RESUME cleanly, never replay a gap or a
// duplicate.

// Config configures Open.
type Config struct {
	// MaxSessions bounds live and restored sessions together (default
	// rsocket.DefaultMaxResumeSessions).
	MaxSessions int
	// Sync: when a record is durable. The zero value is seglog's
	// default, SyncAlways: fdatasync before the batch it describes goes
	// out, which survives a machine crash. SyncNone hands it to the
	// kernel only, which survives a process crash (SIGKILL) but not a
	// machine crash, for the cost of a write; SyncInterval is between.
	Sync seglog.SyncPolicy
	// SessionLifetime: a restored session whose client does not resume
	// within it is forgotten (default 60 s, as rsocket.ResumeConfig's).
	SessionLifetime time.Duration
	// CompactBytes: after this many bytes of records the journal is
	// rewritten as one image per session and older segments removed
	// (default 64 MiB).
	CompactBytes int64
	// SegmentBytes: the journal's segment size (default 16 MiB);
	// compaction frees whole segments.
	SegmentBytes int64
	// Logger (default: discard).
	Logger *slog.Logger
}

// Stats counts a Store's work.
type Stats struct {
	Sessions    int    // live sessions
	Dormant     int    // restored from the journal, waiting for their RESUME
	Loaded      uint64 // sessions read back at Open
	Restored    uint64 // dormant sessions resumed
	Expired     uint64 // dormant sessions forgotten after SessionLifetime
	Records     uint64 // records written
	Bytes       uint64 // bytes written to the journal
	Syncs       uint64 // fdatasyncs of the journal (Sync)
	Failures    uint64 // records that could not be written
	Skipped     uint64 // sessions dropped at Open: damaged or inconsistent records
	Compactions uint64
	Repaired    bool // the journal was damaged and salvaged at Open
}

// Store is an rsocket.ResumeStore that survives the server process.
// Open it once per directory (a second process gets an error naming the
// holder), pass it as rsocket.ResumeConfig.Store, Close it on shutdown.
type Store struct {
	cfg  Config
	lock *dirlock.Lock
	log  *seglog.Log

	mu sync.Mutex
	// live: the sessions of this process; journals: the writers of
	// those that are journaled (compaction rewrites them).
	live     map[string]*rsocket.Conn
	journals map[string]*sessionJournal
	dormant  map[string]*dormantSession
	expiry   *time.Timer

	// sinceCompact counts the bytes written since the last compaction,
	// lastCompact what that compaction wrote: the next one starts when
	// the journal grew by CompactBytes and by twice its live size, so
	// compacting costs at most half of what is written.
	sinceCompact, lastCompact atomic.Int64
	// closed: Close began (set under mu, read without it by persist);
	// sessions send nothing more and nothing more is written.
	closed     atomic.Bool
	compacting atomic.Bool
	compactWG  sync.WaitGroup

	loaded, restored, expired, records, failures, skipped, compactions atomic.Uint64
	repaired                                                           bool
}

// The driver checks for these capabilities of a store.
var (
	_ rsocket.JournalingResumeStore = (*Store)(nil)
	_ rsocket.RestoringResumeStore  = (*Store)(nil)
)

type dormantSession struct {
	rsocket.DormantSession
	until time.Time
	// restoring: a connection is rebuilding the session (ResumeTarget);
	// under the store's mu.
	restoring bool
}

// Open opens (creating it if needed) the journal in dir and reads back
// the sessions of the previous process.
func Open(dir string, cfg Config) (*Store, error) {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = rsocket.DefaultMaxResumeSessions
	}
	if cfg.SessionLifetime <= 0 {
		cfg.SessionLifetime = conn.DefaultResumeSessionLifetime
	}
	if cfg.CompactBytes <= 0 {
		cfg.CompactBytes = 64 << 20
	}
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = 16 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	lock, err := dirlock.Acquire(dir, "resume journal")
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, lock: lock, live: map[string]*rsocket.Conn{}, journals: map[string]*sessionJournal{},
		dormant: map[string]*dormantSession{}}
	// An image holds a session's retained frames, as many as its
	// ResumeConfig.BufferBytes allows: beyond seglog's default record
	// limit once that is set above 32 MiB (compaction could then never
	// rewrite the session, and the journal would grow without bound),
	// so records may be as large as seglog allows.
	opts := []seglog.Option{seglog.WithSync(cfg.Sync), seglog.WithSegmentBytes(cfg.SegmentBytes), seglog.WithLogger(cfg.Logger),
		seglog.WithMaxRecordBytes(seglog.MaxRecordLimit)}
	s.log, err = seglog.Open(dir, opts...)
	if _, bad := seglog.IsCorrupt(err); bad {
		// Salvage: every intact record stays; a session whose records
		// were damaged is dropped below (its sequence has a hole).
		cfg.Logger.Warn("resumejournal: resume journal damaged, salvaging", "dir", dir, "err", err)
		if _, rerr := seglog.Repair(dir, seglog.WithLogger(cfg.Logger)); rerr != nil {
			lock.Release()
			return nil, fmt.Errorf("resumejournal: repair resume journal %s: %w", dir, rerr)
		}
		s.repaired = true
		s.log, err = seglog.Open(dir, opts...)
	}
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("resumejournal: open resume journal %s: %w", dir, err)
	}
	if err := s.load(); err != nil {
		s.log.Close()
		lock.Release()
		return nil, err
	}
	if len(s.dormant) > 0 {
		s.expiry = time.AfterFunc(cfg.SessionLifetime, s.expireDormant)
	}
	return s, nil
}

// load reads the journal back into dormant sessions.
func (s *Store) load() error {
	type building struct {
		img  conn.ResumeImage
		peer string
		seq  uint64
	}
	sessions := map[string]*building{}
	it := s.log.NewIterator(s.log.FirstOffset(), 1<<20)
	bad := map[string]bool{}
	for it.Next() {
		r, err := parseJournalRecord(it.Value())
		if err != nil {
			// A record that passed seglog's checksum but does not parse:
			// written by another version. Its session cannot be trusted.
			s.cfg.Logger.Warn("resumejournal: resume journal record not understood", "offset", it.Offset(), "err", err)
			if r.token != nil {
				bad[string(r.token)] = true
				delete(sessions, string(r.token))
			}
			continue
		}
		key := string(r.token)
		switch r.kind {
		case recordEnd:
			delete(sessions, key)
			delete(bad, key)
		case recordImage:
			delete(bad, key)
			sessions[key] = &building{img: r.image(), peer: r.peer, seq: r.seq}
		case recordDelta:
			b := sessions[key]
			if b == nil {
				// The image before it was compacted away or damaged; a
				// later image may come.
				continue
			}
			if err := applyDelta(&b.img, &r, b.seq); err != nil {
				s.cfg.Logger.Warn("resumejournal: resume journal: session dropped", "err", err)
				delete(sessions, key)
				bad[key] = true
				continue
			}
			b.seq = r.seq
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("resumejournal: read resume journal: %w", err)
	}
	s.skipped.Add(uint64(len(bad)))
	until := time.Now().Add(s.cfg.SessionLifetime)
	for key, b := range sessions {
		if len(s.dormant) >= s.cfg.MaxSessions {
			s.skipped.Add(1)
			continue
		}
		s.dormant[key] = &dormantSession{DormantSession: rsocket.DormantSession{Image: b.img, Peer: b.peer}, until: until}
	}
	s.loaded.Store(uint64(len(s.dormant)))
	if len(s.dormant) > 0 || len(bad) > 0 {
		s.cfg.Logger.Info("resumejournal: resume journal read", "sessions", len(s.dormant), "dropped", len(bad))
	}
	return nil
}

// applyDelta adds the delta record r to img, whose last record had
// sequence number prevSeq.
func applyDelta(img *conn.ResumeImage, r *journalRecord, prevSeq uint64) error {
	switch {
	case r.seq != prevSeq+1:
		return fmt.Errorf("record %d follows record %d: records lost", r.seq, prevSeq)
	case r.sent < img.SentPos || r.tailStart < img.SentPos && len(r.tail) > 0 || r.tailStart > r.sent:
		return fmt.Errorf("positions go back: sent %d after %d, frames from %d", r.sent, img.SentPos, r.tailStart)
	}
	if r.tailStart == img.SentPos {
		img.Retained = append(img.Retained, r.tail...)
	} else {
		// Frames sent between the two records were dropped from the
		// retained buffer before they were written: keep what is left.
		img.Retained = append(img.Retained[:0], r.tail...)
		img.RetainedStart = r.tailStart
	}
	for img.RetainedStart < r.retStart {
		f, rest, ok := conn.NextFrame(img.Retained)
		if !ok {
			return errors.New("retained frames do not line up with the positions")
		}
		img.RetainedStart += uint64(len(f))
		img.Retained = rest
	}
	img.SentPos, img.RecvPos, img.NextID = r.sent, r.recv, r.nextID
	if r.hasStreams {
		img.Streams = r.streams
	}
	return nil
}

// Journal records. Every record is one seglog record, its fields
// written with internal/fields (integers as uvarints, byte strings with
// their length, booleans as 0 or 1):
//
//	byte   version (1)
//	byte   kind: 1 image, 2 delta, 3 end of session
//	bytes  token
//	uint   sequence number within the session (an image restarts it)
//	image only: bytes peer identity; uint keepalive interval ns; uint
//	  max lifetime ns; bool lease
//	image and delta: uint sent position; uint received position; uint
//	  first retained position; uint next stream id; bool streams
//	  follow; [count; count × (uint id, byte interaction, bool
//	  requester)]; uint position of the first frame of the tail; the
//	  tail: the rest of the record, length-prefixed frames (the whole
//	  retained buffer in an image, the frames sent since the last record
//	  in a delta)
const (
	journalVersion = 1
	recordImage    = 1
	recordDelta    = 2
	recordEnd      = 3
)

type journalRecord struct {
	kind  byte
	token []byte
	seq   uint64
	// image
	peer                   string
	keepalive, maxLifetime time.Duration
	lease                  bool
	// image and delta
	sent, recv, retStart uint64
	nextID               uint32
	hasStreams           bool
	streams              []conn.ImageStream
	tailStart            uint64
	tail                 []byte
}

// image is an image record as a conn.ResumeImage, sharing nothing with
// the record: r aliases the journal reader's buffer, which the next
// records overwrite. (The token was shared until 2026-11-29: a session
// restored from a journal where more records followed its image had its
// token overwritten, its Adopt failed with "resume token in use", and
// its client waited for ever; found by hand.)
func (r *journalRecord) image() conn.ResumeImage {
	return conn.ResumeImage{Token: bytes.Clone(r.token), KeepaliveInterval: r.keepalive, MaxLifetime: r.maxLifetime, Lease: r.lease,
		SentPos: r.sent, RecvPos: r.recv, RetainedStart: r.tailStart, Retained: append([]byte(nil), r.tail...),
		NextID: r.nextID, Streams: r.streams}
}

// appendJournalHead appends the head of a record (everything before the
// tail) to b.
func appendJournalHead(b []byte, r *journalRecord) []byte {
	b = append(b, journalVersion, r.kind)
	b = fields.AppendBytes(b, r.token)
	b = fields.AppendUvarint(b, r.seq)
	if r.kind == recordEnd {
		return b
	}
	if r.kind == recordImage {
		b = fields.AppendString(b, r.peer)
		b = fields.AppendUvarint(b, uint64(r.keepalive))
		b = fields.AppendUvarint(b, uint64(r.maxLifetime))
		b = fields.AppendBool(b, r.lease)
	}
	b = fields.AppendUvarint(b, r.sent)
	b = fields.AppendUvarint(b, r.recv)
	b = fields.AppendUvarint(b, r.retStart)
	b = fields.AppendUvarint(b, uint64(r.nextID))
	b = fields.AppendBool(b, r.hasStreams)
	if r.hasStreams {
		b = fields.AppendUvarint(b, uint64(len(r.streams)))
		for _, st := range r.streams {
			b = fields.AppendUvarint(b, uint64(st.ID))
			b = append(b, byte(st.Kind))
			b = fields.AppendBool(b, st.Requester)
		}
	}
	return fields.AppendUvarint(b, r.tailStart)
}

var errJournalRecord = errors.New("resumejournal: malformed resume journal record")

// parseJournalRecord parses a record; the result aliases b. A malformed
// record is an error (with the token when it could be read), never a
// panic.
func parseJournalRecord(b []byte) (journalRecord, error) {
	var r journalRecord
	d := fields.NewReader(b)
	if v := d.Byte(); v != journalVersion {
		return r, fmt.Errorf("%w: version %d", errJournalRecord, v)
	}
	r.kind = d.Byte()
	r.token = d.Bytes()
	if d.Err() != nil || len(r.token) == 0 || len(r.token) > frame.MaxResumeTokenLength {
		return journalRecord{}, fmt.Errorf("%w: token", errJournalRecord)
	}
	r.seq = d.Uvarint()
	switch r.kind {
	case recordEnd:
		if d.Err() != nil || len(d.Rest()) != 0 {
			return r, fmt.Errorf("%w: end record of %d bytes", errJournalRecord, len(b))
		}
		return r, nil
	case recordImage:
		r.peer = d.Text()
		r.keepalive, r.maxLifetime = time.Duration(d.Int63()), time.Duration(d.Int63())
		r.lease = d.Bool()
	case recordDelta:
	default:
		return r, fmt.Errorf("%w: kind %d", errJournalRecord, r.kind)
	}
	r.sent, r.recv, r.retStart = d.Uvarint(), d.Uvarint(), d.Uvarint()
	r.nextID = d.Uint32()
	if r.hasStreams = d.Bool(); r.hasStreams {
		n := d.Count()
		r.streams = make([]conn.ImageStream, 0, n)
		for range n {
			r.streams = append(r.streams, conn.ImageStream{ID: d.Uint32(), Kind: conn.Interaction(d.Byte()), Requester: d.Bool()})
		}
	}
	r.tailStart = d.Uvarint()
	r.tail = d.Rest()
	if err := d.Err(); err != nil {
		return r, fmt.Errorf("%w: %v", errJournalRecord, err)
	}
	return r, nil
}

// The ResumeStore side: live sessions, and dormant ones from the journal.

// Add registers the new session c under token (rsocket.ResumeStore).
func (s *Store) Add(token []byte, c *rsocket.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dormant := s.dormant[string(token)]; dormant {
		return rsocket.ErrResumeTokenInUse
	}
	return s.addLocked(token, c)
}

// addLocked registers c under token as a live session. Under mu.
func (s *Store) addLocked(token []byte, c *rsocket.Conn) error {
	if _, ok := s.live[string(token)]; ok {
		return rsocket.ErrResumeTokenInUse
	}
	if len(s.live)+len(s.dormant) >= s.cfg.MaxSessions {
		return fmt.Errorf("%w (%d)", rsocket.ErrTooManyResumeSession, s.cfg.MaxSessions)
	}
	s.live[string(token)] = c
	return nil
}

// Lookup returns the live session of token, or nil (rsocket.ResumeStore).
func (s *Store) Lookup(token []byte) *rsocket.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[string(token)]
}

// Remove forgets token if it still belongs to c (rsocket.ResumeStore).
func (s *Store) Remove(token []byte, c *rsocket.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[string(token)] == c {
		delete(s.live, string(token))
	}
}

// ResumeTarget finds what a RESUME for token resumes
// (rsocket.RestoringResumeStore): the live session c, or the dormant
// session d (now marked restoring), or busy when another connection is
// restoring it.
func (s *Store) ResumeTarget(token []byte) (c *rsocket.Conn, d *rsocket.DormantSession, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.live[string(token)]; c != nil {
		return c, nil, false
	}
	ds := s.dormant[string(token)]
	switch {
	case ds == nil:
		return nil, nil, false
	case ds.restoring:
		return nil, nil, true
	case time.Now().After(ds.until):
		delete(s.dormant, string(token))
		s.expired.Add(1)
		s.endLocked(token)
		return nil, nil, false
	}
	ds.restoring = true
	return nil, &ds.DormantSession, false
}

// Adopt makes c, restored from the dormant session of token, the live
// session of token (rsocket.RestoringResumeStore).
func (s *Store) Adopt(token []byte, c *rsocket.Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dormant[string(token)]
	if !ok || !d.restoring {
		return rsocket.ErrResumeTokenInUse
	}
	delete(s.dormant, string(token))
	if err := s.addLocked(token, c); err != nil {
		return err
	}
	s.restored.Add(1)
	return nil
}

// Release gives back a dormant session ResumeTarget handed out and that
// was not restored (rsocket.RestoringResumeStore).
func (s *Store) Release(token []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.dormant[string(token)]; ok {
		d.restoring = false
	}
}

// Drop forgets a dormant session that cannot be restored
// (rsocket.RestoringResumeStore).
func (s *Store) Drop(token []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.dormant, string(token))
	s.endLocked(token)
}

// expireDormant forgets the dormant sessions whose lifetime passed.
func (s *Store) expireDormant() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	now := time.Now()
	for key, d := range s.dormant {
		if now.After(d.until) && !d.restoring {
			delete(s.dormant, key)
			s.expired.Add(1)
			s.endLocked([]byte(key))
		}
	}
	if len(s.dormant) > 0 {
		s.expiry.Reset(time.Second)
	}
}

// endLocked writes the end of token's session. Under mu.
func (s *Store) endLocked(token []byte) {
	if s.closed.Load() {
		return
	}
	r := journalRecord{kind: recordEnd, token: token}
	if _, err := s.log.Append([][]byte{appendJournalHead(nil, &r)}); err != nil {
		s.failures.Add(1)
	}
}

// end writes the end of the live session of j (it closed for good, or
// cannot be journaled) and forgets j.
func (s *Store) end(j *sessionJournal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journals[string(j.token)] == j {
		delete(s.journals, string(j.token))
	}
	s.endLocked(j.token)
}

// Close stops writing and releases the directory. Live sessions are not
// ended: a server that restarts on the same directory resumes them.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	if s.expiry != nil {
		s.expiry.Stop()
	}
	s.mu.Unlock()
	s.compactWG.Wait()
	err := s.log.Close()
	s.lock.Release()
	return err
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	live, dormant := len(s.live), len(s.dormant)
	s.mu.Unlock()
	ls := s.log.Stats()
	return Stats{Sessions: live, Dormant: dormant, Loaded: s.loaded.Load(), Restored: s.restored.Load(),
		Expired: s.expired.Load(), Records: s.records.Load(), Bytes: ls.Bytes, Syncs: ls.Syncs, Failures: s.failures.Load(), Skipped: s.skipped.Load(),
		Compactions: s.compactions.Load(), Repaired: s.repaired}
}

// StartJournal begins the journal of the live session of token
// (rsocket.JournalingResumeStore): its first record is a full image.
func (s *Store) StartJournal(token []byte, peer string, rewrite func() error) rsocket.SessionJournal {
	j := &sessionJournal{store: s, token: token, peer: peer, rewrite: rewrite, full: true}
	s.mu.Lock()
	s.journals[string(token)] = j
	s.mu.Unlock()
	return j
}

// sessionJournal is one live session's writer (rsocket.SessionJournal);
// its methods run under the session's lock.
type sessionJournal struct {
	store   *Store
	token   []byte
	peer    string
	rewrite func() error // the session's image now (compaction)
	cur     conn.ResumeCursor
	seq     uint64
	full    bool      // the next record is an image
	retryAt time.Time // after a failed write, no record before this
	head    []byte
	parts   [2][]byte
	streams []conn.ImageStream
}

var errImageNotWritten = errors.New("resumejournal: a session's image could not be written")

// RecordImage writes an image of m's session now.
func (j *sessionJournal) RecordImage(m *conn.Machine) error {
	j.full = true
	if err := j.Record(m); err != nil {
		return err
	}
	if j.full {
		return errImageNotWritten // the write failed
	}
	return nil
}

// End writes the end of the session.
func (j *sessionJournal) End() { j.store.end(j) }

// Record writes what changed in m's session since its last record,
// before the output that changed it goes to the transport.
func (j *sessionJournal) Record(m *conn.Machine) error {
	if j.store.closed.Load() {
		return rsocket.ErrJournalClosed
	}
	now := m.ResumeCursor()
	if !j.full && now == j.cur {
		return nil
	}
	if !j.retryAt.IsZero() && time.Now().Before(j.retryAt) {
		return nil
	}
	var (
		r    journalRecord
		tail []byte
	)
	if j.full {
		img, err := m.ResumeImage()
		if err != nil {
			// Not restorable (the byte-credits extension), or no longer
			// open (closing): stop writing the session.
			j.store.end(j)
			return rsocket.ErrNotJournaled
		}
		r, tail = imageRecord(&img, j.peer), img.Retained
	} else {
		r = journalRecord{kind: recordDelta, token: j.token, seq: j.seq + 1, sent: now.SentPos, recv: now.RecvPos,
			retStart: now.RetainedStart, nextID: now.NextID}
		r.tailStart, tail = m.ResumeTail(j.cur)
		if now.StreamsVersion != j.cur.StreamsVersion {
			j.streams = m.OpenStreams(j.streams[:0])
			r.hasStreams, r.streams = true, j.streams
		}
	}
	j.head = appendJournalHead(j.head[:0], &r)
	j.parts[0], j.parts[1] = j.head, tail
	_, err := j.store.log.AppendParts(j.parts[:1], j.parts[1:])
	j.parts[1] = nil
	if err != nil {
		// Not written: the session goes on (the journal is only behind,
		// which a restart turns into a clean rejection of its RESUME at
		// worst); an image is tried again in a second.
		j.store.failures.Add(1)
		j.full, j.retryAt = true, time.Now().Add(time.Second)
		if !errors.Is(err, seglog.ErrClosed) {
			j.store.cfg.Logger.Warn("resumejournal: resume journal write failed", "err", err)
		}
		return nil
	}
	j.store.records.Add(1)
	j.cur, j.seq, j.full, j.retryAt = now, r.seq, false, time.Time{}
	if j.store.sinceCompact.Add(int64(len(j.head)+len(tail))) > max(j.store.cfg.CompactBytes, 2*j.store.lastCompact.Load()) &&
		j.store.compacting.CompareAndSwap(false, true) {
		j.store.startCompaction()
	}
	if cap(j.head) > 1<<20 {
		j.head = nil // an image's stream list was long: do not keep it
	}
	return nil
}

// startCompaction rewrites the journal as one image per session in the
// background, then removes the segments before it.
func (s *Store) startCompaction() {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		s.compacting.Store(false)
		return
	}
	s.compactWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.compactWG.Done()
		defer s.compacting.Store(false)
		if err := s.compact(); err != nil {
			s.cfg.Logger.Warn("resumejournal: resume journal compaction failed", "err", err)
		}
	}()
}

// compact writes an image of every session, live and dormant, after
// offset from, then removes the segments before from: every record
// before it is superseded.
func (s *Store) compact() error {
	from, before := s.log.NextOffset(), s.log.Stats().Bytes
	defer func() {
		s.lastCompact.Store(int64(s.log.Stats().Bytes - before))
		s.sinceCompact.Store(0)
	}()
	s.mu.Lock()
	for _, d := range s.dormant {
		r := imageRecord(&d.Image, d.Peer)
		if _, err := s.log.AppendParts([][]byte{appendJournalHead(nil, &r)}, [][]byte{d.Image.Retained}); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	journals := make([]*sessionJournal, 0, len(s.journals))
	for _, j := range s.journals {
		journals = append(journals, j)
	}
	s.mu.Unlock()
	// Outside mu: a session's lock is taken before the store's.
	for _, j := range journals {
		if err := j.rewrite(); err != nil {
			return err
		}
	}
	if _, err := s.log.RemoveBefore(from); err != nil {
		return err
	}
	s.compactions.Add(1)
	return nil
}

// imageRecord is the image record of img; its tail is img.Retained.
func imageRecord(img *conn.ResumeImage, peer string) journalRecord {
	return journalRecord{kind: recordImage, token: img.Token, seq: 1, peer: peer, keepalive: img.KeepaliveInterval,
		maxLifetime: img.MaxLifetime, lease: img.Lease, sent: img.SentPos, recv: img.RecvPos, retStart: img.RetainedStart,
		nextID: img.NextID, hasStreams: true, streams: img.Streams, tailStart: img.RetainedStart}
}
