package seglog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Log is a segmented append-only log. All methods are safe for concurrent
// use.
type Log struct {
	dir string
	cfg config

	mu   sync.Mutex
	cond sync.Cond // signalled when a batch completes

	// segs are the live segments in offset order; the last one is active.
	// Invariant: segs[i].next == segs[i+1].base.
	segs []*segment

	// next is the offset the next appended record gets.
	next uint64
	// tailBase and tailSize describe the segment the next encoded record
	// goes into as it will be once every pending batch is written: they run
	// ahead of the active segment's size by what is queued.
	tailBase uint64
	tailSize int64
	// lastIndexed is the position of the newest index entry in the tail.
	lastIndexed int64

	pending *batch // accumulating; written by the next leader
	spare   *batch // the batch object the current leader will hand back
	// flushing is true while a leader writes a batch outside the lock.
	flushing bool
	// completed is the sequence number of the newest finished batch.
	completed uint64
	failures  []failedRange
	broken    error
	closed    bool

	// durable: every offset below it has been fdatasync'ed.
	durable uint64
	// unsynced is true when bytes were written since the last fdatasync.
	unsynced bool

	// notify is closed and replaced when records become visible, but only
	// if someone waits (so the append path does not allocate).
	notify  chan struct{}
	waiters bool

	// reserved: offsets below it may have been handed out
	// (WithOffsetReservation); skipFrom, skipTo: what Open skipped.
	reserved, skipFrom, skipTo uint64

	stats     Stats
	stopSync  chan struct{}
	syncerRun sync.WaitGroup
}

// batch is a group of encoded records that one leader writes at once.
type batch struct {
	seq  uint64
	buf  []byte
	n    int    // records
	from uint64 // offset of the first record
	// splits are positions in buf where a new segment must begin.
	splits []split
	// index entries for the records in buf, with positions in their segment.
	index []indexEntry
	// refs are large record bodies the batch writes from the appenders'
	// memory instead of copying them into buf: each goes before buf[at:].
	// Appenders wait until their batch is written (appendN), so the memory
	// outlives the write; refs are dropped once it is done.
	refs    []ref
	refSize int
}

type ref struct {
	at   int
	data []byte
}

// refMin is the size from which a head or body is written from the
// appender's memory: below it the copy costs less than the extra write
// call.
const refMin = 16 << 10

// size is the batch's length in the segment: buf and the refs.
func (b *batch) size() int { return len(b.buf) + b.refSize }

// pieces calls fn with the batch's bytes in order, as slices of buf and
// refs, between the positions start and end (as size counts them).
func (b *batch) pieces(start, end int, fn func(p []byte) error) error {
	pos, prev := 0, 0 // pos: position of buf[prev] in the batch
	emit := func(p []byte) error {
		lo, hi := max(start-pos, 0), min(end-pos, len(p))
		pos += len(p)
		if lo < hi {
			return fn(p[lo:hi])
		}
		return nil
	}
	for _, r := range b.refs {
		if err := emit(b.buf[prev:r.at]); err != nil {
			return err
		}
		prev = r.at
		if err := emit(r.data); err != nil {
			return err
		}
	}
	return emit(b.buf[prev:])
}

type split struct {
	pos  int
	base uint64
}

type failedRange struct {
	lo, hi uint64 // batch sequence numbers, inclusive
	err    error
}

func (b *batch) reset(seq uint64) {
	b.seq, b.buf, b.n, b.splits, b.index = seq, b.buf[:0], 0, b.splits[:0], b.index[:0]
	clear(b.refs) // the appenders' memory is theirs again
	b.refs, b.refSize = b.refs[:0], 0
}

// Stats are counters since Open.
type Stats struct {
	Appends   uint64 // Append calls that succeeded
	Records   uint64 // records appended
	Bytes     uint64 // frame bytes written
	Writes    uint64 // write batches (group commits)
	Syncs     uint64 // fdatasync calls on segments
	TornTails uint64 // torn final records truncated at Open
	TornBytes uint64 // bytes truncated at Open
	// DamagedTails: final records damaged after they were written whole,
	// quarantined and truncated at Open (damagedTail).
	DamagedTails   uint64
	DamagedBytes   uint64
	WriteErrors    uint64 // failed writes that were undone
	SegmentsSealed uint64
	SegmentsRemove uint64
}

// Open opens or creates the log in dir and recovers it (see the package
// documentation).
func Open(dir string, opts ...Option) (*Log, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("seglog: create %s: %w", dir, err)
	}
	l := &Log{dir: dir, cfg: cfg}
	l.cond.L = &l.mu
	l.pending, l.spare = &batch{seq: 1}, &batch{}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if cfg.reserveStep > 0 {
		if err := l.skipReserved(); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	if cfg.sync.mode == syncInterval {
		l.stopSync = make(chan struct{})
		l.syncerRun.Add(1)
		go l.syncLoop(cfg.sync.interval)
	}
	return l, nil
}

func (l *Log) recover() error {
	fs := l.cfg.fs
	// Leftover temporary files are from interrupted index or metadata
	// writes; the originals are intact.
	if entries, err := fs.ReadDir(l.dir); err == nil {
		for _, e := range entries {
			// An interrupted Repair leaves a segment's .tmp; the segment
			// itself is still the old one.
			if strings.HasSuffix(e.Name(), idxSuffix+".tmp") || strings.HasSuffix(e.Name(), segSuffix+".tmp") {
				_ = fs.Remove(filepath.Join(l.dir, e.Name()))
			}
		}
	}
	bases, err := listSegments(fs, l.dir)
	if err != nil {
		return fmt.Errorf("seglog: list %s: %w", l.dir, err)
	}
	if len(bases) == 0 {
		s, err := l.createSegment(0)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
	}
	for i, base := range bases {
		last := i == len(bases)-1
		s, err := l.openSegment(base, last)
		if err != nil {
			return err
		}
		if i > 0 && l.segs[i-1].next != base {
			prev := l.segs[i-1]
			return &CorruptionError{File: s.path, Pos: 0, Offset: prev.next,
				Reason: fmt.Sprintf("segment starts at offset %d but the previous one ends at %d (missing or extra data)", base, prev.next)}
		}
		l.segs = append(l.segs, s)
	}
	tail := l.segs[len(l.segs)-1]
	l.next, l.durable = tail.next, tail.next
	l.tailBase, l.tailSize = tail.base, tail.size
	l.lastIndexed = -l.cfg.indexInterval
	if n := len(tail.index); n > 0 {
		l.lastIndexed = tail.index[n-1].pos
	}
	return nil
}

// openSegment opens and verifies one segment. For the last segment, a bad
// final record is a torn write and is truncated.
func (l *Log) openSegment(base uint64, last bool) (*segment, error) {
	path := filepath.Join(l.dir, segmentName(base))
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := l.cfg.fs.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("seglog: open segment: %w", err)
	}
	s := &segment{base: base, path: path, f: f, sealed: !last}
	if !last && l.cfg.trustSealed {
		if size, err := f.Size(); err == nil {
			if idx, next, err := readIndex(l.cfg.fs, l.dir, base, size); err == nil {
				s.index, s.next, s.size = idx, next, size
				return s, nil
			}
		}
	}
	r, err := scanSegment(f, base, l.cfg.maxRecordBytes, l.cfg.indexInterval)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: read %s: %w", path, err)
	}
	s.index, s.next, s.size = r.index, r.next, r.size
	if r.bad == nil {
		return s, nil
	}
	corrupt := &CorruptionError{File: path, Pos: r.size, Offset: r.next, Reason: r.bad.Error()}
	if !last {
		f.Close()
		return nil, corrupt
	}
	found, at, err := validAfter(f, r.size, r.next, l.cfg.maxRecordBytes)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: read %s: %w", path, err)
	}
	if found {
		f.Close()
		corrupt.Reason += fmt.Sprintf("; a valid record follows at byte %d, so this is not a torn write", at)
		return nil, corrupt
	}
	// A torn write: everything from r.size on was never acknowledged. Or
	// the whole segment holds records below its base: RemoveBefore renamed
	// a consumed active segment and crashed before emptying it
	// (reuseActive), so they were consumed. Or a final record damaged
	// after it was written whole (damagedTail): it may have been
	// acknowledged, so its bytes are kept in the quarantine first.
	tail, damaged, err := damagedTail(f, r)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: read %s: %w", path, err)
	}
	var kept string
	if damaged {
		kept, err = l.quarantine(segmentName(base), r.size, tail)
		if err != nil {
			// Never wedge the log on the quarantine (a full disk): the
			// record is lost either way; say so.
			kept = "not kept: " + err.Error()
		}
	}
	truncate := f.Truncate
	if mutationKeepTornTail {
		truncate = func(int64) error { return nil }
	}
	end, gapErr := r.size, error(nil)
	if damaged && !mutationReuseDamagedOffset {
		// The damaged record was written whole, so its offset may have
		// been handed out (a message id a sink holds, a store offset a
		// consumer group has passed): never give it to another record.
		// A gap frame in its place keeps it taken, as Repair's do. It is
		// written over the damaged bytes before they are cut off (no new
		// space needed, and a crash between the two leaves the gap and
		// bytes after it that the next Open handles), or after the cut
		// when the record was shorter than a gap.
		gap := appendGap(nil, r.next, 1)
		if int64(len(gap)) > r.fileLen-r.size {
			if err := truncate(r.size); err != nil {
				f.Close()
				return nil, fmt.Errorf("seglog: truncate torn tail of %s: %w", path, err)
			}
		}
		if _, gapErr = f.WriteAt(gap, r.size); gapErr == nil {
			end = r.size + int64(len(gap))
		}
	}
	if err := truncate(end); err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: truncate torn tail of %s: %w", path, err)
	}
	if end > r.size {
		s.size, s.next = end, r.next+1
	}
	if err := f.Datasync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: sync %s: %w", path, err)
	}
	if r.size == 0 && r.belowBase {
		l.cfg.logger.Info("seglog: emptied a consumed segment whose roll was interrupted",
			"file", path, "offset", base, "bytes", r.fileLen)
		return s, nil
	}
	if damaged {
		l.stats.DamagedTails++
		l.stats.DamagedBytes += uint64(r.fileLen - r.size)
		offsetKept := "kept: a gap holds it, the next record takes the offset after it"
		if gapErr != nil {
			offsetKept = "NOT kept (writing the gap failed: " + gapErr.Error() + "): the next record takes it"
		}
		l.cfg.logger.Error("seglog: the final record was damaged after it was written whole (no sign of a torn write); "+
			"its bytes are in the quarantine and the log goes on without it",
			"file", path, "pos", r.size, "offset", r.next, "bytes", r.fileLen-r.size, "reason", r.bad.Error(), "quarantine", kept,
			"its_offset", offsetKept)
		return s, nil
	}
	l.stats.TornTails++
	l.stats.TornBytes += uint64(r.fileLen - r.size)
	l.cfg.logger.Warn("seglog: truncated torn final record",
		"file", path, "pos", r.size, "offset", r.next, "bytes", r.fileLen-r.size, "reason", r.bad.Error())
	return s, nil
}

// sectorSize is the unit a torn write leaves unwritten: a crash between
// a file's growth and its data reaching the disk reads back as zeros in
// whole sectors (or pages, which are sectors too).
const sectorSize = 512

// damagedTail reports whether the bad final record r found was damaged
// after it was written whole rather than torn by a crash (damagedRecord),
// with the file's bytes from it to the end when it was.
func damagedTail(f File, r scanResult) (tail []byte, damaged bool, err error) {
	if mutationDamagedAsTorn || !damagedError(r.bad) {
		return nil, false, nil
	}
	tail = make([]byte, r.fileLen-r.size)
	if _, err := f.ReadAt(tail, r.size); err != nil && err != io.EOF {
		return nil, false, err
	}
	return tail, damagedRecord(r.bad, tail, r.size), nil
}

// damagedRecord reports whether a bad final record, which failed with bad
// and whose bytes to the end of the file are tail (from file position
// pos), was damaged after it was written whole rather than torn by a
// crash: its header or checksum is wrong, and no sector from it to the end
// of the file reads as zeros (etcd's WAL tells its torn entries the same
// way). A crash can cut a write short or leave zeros where data was not
// yet on disk; it does not invent other bytes. A record cut short
// (errShort), an unwritten header (errZero) and a whole record at the
// wrong offset (reuseActive, above) stay torn. Open and Check both use it.
func damagedRecord(bad error, tail []byte, pos int64) bool {
	return damagedError(bad) && noZeroSector(tail, pos)
}

func damagedError(bad error) bool { return errors.Is(bad, errChecksum) || errors.Is(bad, errHeader) }

// noZeroSector reports whether no sector that rest, the file's bytes from
// pos to its end, overlaps reads as zeros (each clipped to rest).
func noZeroSector(rest []byte, pos int64) bool {
	end := pos + int64(len(rest))
	for at := pos &^ (sectorSize - 1); at < end; at += sectorSize {
		from, to := max(at, pos)-pos, min(at+sectorSize, end)-pos
		if allZero(rest[from:to]) {
			return false
		}
	}
	return true
}

// quarantineName is the name in the quarantine of the damaged bytes from
// position pos of segment file seg (Open and Repair).
func quarantineName(seg string, pos int64) string { return fmt.Sprintf("%s.%d.broken", seg, pos) }

// quarantine writes data, the damaged bytes from position pos of segment
// file seg, into the log's quarantine directory, as Repair does, and
// returns the copy's path.
func (l *Log) quarantine(seg string, pos int64, data []byte) (string, error) {
	qdir := filepath.Join(l.dir, "quarantine")
	if err := l.cfg.fs.MkdirAll(qdir, 0o755); err != nil {
		return "", err
	}
	path, err := writeNew(l.cfg.fs, qdir, quarantineName(seg, pos), data)
	if err != nil {
		return "", err
	}
	return path, l.cfg.fs.SyncDir(qdir)
}

func (l *Log) createSegment(base uint64) (*segment, error) {
	path := filepath.Join(l.dir, segmentName(base))
	f, err := l.cfg.fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seglog: create segment: %w", err)
	}
	if err := l.cfg.fs.SyncDir(l.dir); err != nil {
		f.Close()
		_ = l.cfg.fs.Remove(path)
		return nil, fmt.Errorf("seglog: sync dir %s: %w", l.dir, err)
	}
	return &segment{base: base, path: path, f: f, next: base}, nil
}

// Append appends records and returns the offset of the first; the others
// follow consecutively. It returns once the configured durability holds for
// all of them (see SyncPolicy). Records are copied; the caller may reuse
// them at once. On error none of the records is in the log.
func (l *Log) Append(records [][]byte) (first uint64, err error) {
	return l.appendN(len(records), func(i int) ([]byte, []byte) { return records[i], nil })
}

// AppendParts is Append of the records heads[i] followed by bodies[i],
// without the caller joining them first: a caller that frames a payload
// with a header of its own (a stored message's header, say) saves a copy
// of every payload. heads and bodies have the same length; what the log
// holds, and reads back, is each pair as one record.
func (l *Log) AppendParts(heads, bodies [][]byte) (first uint64, err error) {
	if len(heads) != len(bodies) {
		return 0, fmt.Errorf("seglog: AppendParts with %d heads and %d bodies", len(heads), len(bodies))
	}
	return l.appendN(len(heads), func(i int) ([]byte, []byte) { return heads[i], bodies[i] })
}

func (l *Log) appendN(n int, record func(int) (head, body []byte)) (first uint64, err error) {
	for i := range n {
		h, b := record(i)
		if len(h)+len(b) > l.cfg.maxRecordBytes {
			return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, len(h)+len(b), l.cfg.maxRecordBytes)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	if l.broken != nil {
		return 0, l.broken
	}
	first = l.next
	if n == 0 {
		return first, nil
	}
	b := l.pending
	if b.n == 0 {
		b.from = l.next
	}
	for i := range n {
		h, body := record(i)
		l.encode(b, h, body)
	}
	seq := b.seq
	for l.completed < seq {
		if !l.flushing {
			l.flush()
			continue
		}
		l.cond.Wait()
	}
	if err := l.failure(seq); err != nil {
		return 0, err
	}
	l.stats.Appends++
	return first, nil
}

// encode adds one record to the pending batch, deciding where segments roll
// and where index entries fall. Caller holds mu.
func (l *Log) encode(b *batch, head, body []byte) {
	size := int64(frameSize(len(head) + len(body)))
	if l.tailSize > 0 && l.tailSize+size > l.cfg.segmentBytes {
		b.splits = append(b.splits, split{pos: b.size(), base: l.next})
		l.tailBase, l.tailSize = l.next, 0
		l.lastIndexed = -l.cfg.indexInterval
	}
	if l.tailSize-l.lastIndexed >= l.cfg.indexInterval {
		b.index = append(b.index, indexEntry{offset: l.next, pos: l.tailSize})
		l.lastIndexed = l.tailSize
	}
	if len(head) < refMin && len(body) < refMin {
		b.buf = appendRecordParts(b.buf, l.next, head, body)
	} else {
		b.buf = appendFrameHeader(b.buf, l.next, head, body)
		for _, p := range [2][]byte{head, body} {
			if len(p) >= refMin {
				b.refs = append(b.refs, ref{at: len(b.buf), data: p})
				b.refSize += len(p)
			} else {
				b.buf = append(b.buf, p...)
			}
		}
		pad := framePadding(len(head) + len(body))
		b.buf = grow(b.buf, pad)
		clear(b.buf[len(b.buf)-pad:])
	}
	b.n++
	l.next++
	l.tailSize += size
}

func (l *Log) failure(seq uint64) error {
	for i := len(l.failures) - 1; i >= 0; i-- {
		f := l.failures[i]
		if seq >= f.lo && seq <= f.hi {
			return f.err
		}
		if seq > f.hi {
			break
		}
	}
	return nil
}

// flush makes the caller the leader: it takes the pending batch, writes it
// outside the lock, and publishes the result. Caller holds mu.
func (l *Log) flush() {
	b := l.pending
	l.pending = l.spare
	l.pending.reset(b.seq + 1)
	l.spare = nil
	l.flushing = true
	active := l.segs[len(l.segs)-1]
	activeSize := active.size
	sync := l.cfg.sync.mode == syncAlways
	// Offsets published before they are durable are reserved first.
	reserve := uint64(0)
	if end := b.from + uint64(b.n); l.cfg.reserveStep > 0 && !sync && end > l.reserved {
		reserve = end + l.cfg.reserveStep
	}
	l.mu.Unlock()

	var created []*segment
	werr := error(nil)
	if reserve > 0 {
		werr = l.writeReservation(reserve)
	}
	reserved := reserve > 0 && werr == nil
	if werr == nil {
		created, werr = l.write(b, active, activeSize, sync)
	}

	l.mu.Lock()
	if reserved {
		l.reserved = reserve
	}
	l.flushing = false
	l.spare = b
	l.completed = b.seq
	defer l.cond.Broadcast()
	if werr != nil {
		for _, s := range created {
			s.f.Close()
		}
		l.fail(b, werr)
		return
	}
	l.publish(b, created)
	if sync {
		l.durable = b.from + uint64(b.n)
		l.stats.Syncs++
	} else {
		l.unsynced = true
	}
}

// write puts a batch on disk: parts before each split go to the current
// segment, which is then sealed before the next one is created, so that a
// torn write can only ever be in the last segment.
func (l *Log) write(b *batch, active *segment, pos int64, sync bool) (created []*segment, err error) {
	cur := active
	start := 0
	for i := 0; i <= len(b.splits); i++ {
		end := b.size()
		if i < len(b.splits) {
			end = b.splits[i].pos
		}
		if end > start {
			// One write per piece: buf's parts and the large bodies in
			// between, none of them copied. A crash between two writes
			// leaves a torn tail, as a short single write would.
			err := b.pieces(start, end, func(p []byte) error {
				_, err := cur.f.WriteAt(p, pos)
				pos += int64(len(p))
				return err
			})
			if err != nil {
				return created, &WriteError{File: cur.path, Err: err}
			}
		}
		if i == len(b.splits) {
			break
		}
		// Seal cur: its data must be durable before a later segment exists,
		// under every policy (SyncNone too: a torn record in a segment that
		// is not the last is corruption, and Sync syncs only the last).
		if err := l.timedSync(cur); err != nil {
			return created, err
		}
		next, err := l.createSegment(b.splits[i].base)
		if err != nil {
			return created, &WriteError{File: filepath.Join(l.dir, segmentName(b.splits[i].base)), Err: err}
		}
		created = append(created, next)
		cur, pos, start = next, 0, end
	}
	if sync {
		if err := l.timedSync(cur); err != nil {
			return created, err
		}
	}
	return created, nil
}

func (l *Log) timedSync(s *segment) error {
	start := time.Now()
	err := s.f.Datasync()
	l.observeSync(err == nil, start)
	if err != nil {
		return fmt.Errorf("%w: fdatasync %s: %v", ErrBroken, s.path, err)
	}
	return nil
}

func (l *Log) observeSync(ok bool, start time.Time) {
	if !ok {
		return
	}
	d := time.Since(start)
	if l.cfg.onSync != nil {
		l.cfg.onSync(d)
	}
	if d > l.cfg.slowSync {
		l.cfg.logger.Warn("seglog: slow fdatasync", "dir", l.dir, "duration", d)
	}
}

// publish makes a written batch visible. Caller holds mu.
func (l *Log) publish(b *batch, created []*segment) {
	cur := l.segs[len(l.segs)-1]
	start, idx := 0, 0
	for i := 0; i <= len(b.splits); i++ {
		end, endOff := b.size(), b.from+uint64(b.n)
		if i < len(b.splits) {
			end, endOff = b.splits[i].pos, b.splits[i].base
		}
		for idx < len(b.index) && b.index[idx].offset < endOff {
			cur.index = append(cur.index, b.index[idx])
			idx++
		}
		cur.size += int64(end - start)
		cur.next = endOff
		if i == len(b.splits) {
			break
		}
		cur.sealed = true
		l.stats.SegmentsSealed++
		if err := writeIndex(l.cfg.fs, l.dir, cur); err != nil {
			l.cfg.logger.Warn("seglog: index not written; it will be rebuilt on open", "segment", cur.path, "err", err)
		}
		cur = created[i]
		l.segs = append(l.segs, cur)
		start = end
	}
	l.stats.Records += uint64(b.n)
	l.stats.Bytes += uint64(b.size())
	l.stats.Writes++
	if l.waiters {
		close(l.notify)
		l.notify, l.waiters = nil, false
	}
}

// fail undoes a failed write and fails the batch and everything queued
// behind it. Caller holds mu.
func (l *Log) fail(b *batch, err error) {
	l.stats.WriteErrors++
	hi := l.pending.seq
	l.failures = append(l.failures, failedRange{lo: b.seq, hi: hi, err: err})
	if len(l.failures) > 64 {
		l.failures = append(l.failures[:0], l.failures[len(l.failures)-64:]...)
	}
	// Everything queued behind the failed batch was encoded with offsets
	// and positions that assumed it would succeed.
	l.completed = hi
	l.pending.reset(hi + 1)
	active := l.segs[len(l.segs)-1]
	if errors.Is(err, ErrBroken) {
		l.broken = err
	} else if terr := l.undo(active); terr != nil {
		l.broken = fmt.Errorf("%w: undo failed write: %v (after %v)", ErrBroken, terr, err)
	}
	l.next = active.next
	l.tailBase, l.tailSize = active.base, active.size
	l.lastIndexed = -l.cfg.indexInterval
	if n := len(active.index); n > 0 {
		l.lastIndexed = active.index[n-1].pos
	}
}

// undo truncates the active segment back to its last published record and
// removes segments a failed batch created.
func (l *Log) undo(active *segment) error {
	bases, err := listSegments(l.cfg.fs, l.dir)
	if err != nil {
		return err
	}
	removed := false
	for _, base := range bases {
		if base > active.base {
			if err := l.cfg.fs.Remove(filepath.Join(l.dir, segmentName(base))); err != nil {
				return err
			}
			removed = true
		}
	}
	if removed {
		if err := l.cfg.fs.SyncDir(l.dir); err != nil {
			return err
		}
	}
	return active.f.Truncate(active.size)
}

// Sync forces everything appended so far to stable storage.
func (l *Log) Sync() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if !l.unsynced || l.broken != nil {
		err := l.broken
		l.mu.Unlock()
		return err
	}
	active := l.segs[len(l.segs)-1]
	active.refs++
	target := active.next
	l.unsynced = false
	l.mu.Unlock()

	err := l.timedSync(active)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(active)
	if err != nil {
		l.broken = err
		return err
	}
	l.stats.Syncs++
	if target > l.durable {
		l.durable = target
	}
	return nil
}

func (l *Log) syncLoop(d time.Duration) {
	defer l.syncerRun.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-l.stopSync:
			return
		case <-t.C:
			if err := l.Sync(); err != nil && !errors.Is(err, ErrClosed) {
				l.cfg.logger.Error("seglog: background sync failed", "dir", l.dir, "err", err)
			}
		}
	}
}

// FirstOffset is the offset of the oldest record still in the log.
func (l *Log) FirstOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.segs[0].base
}

// NextOffset is the offset the next appended record will get; every record
// below it is visible to readers.
func (l *Log) NextOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.segs[len(l.segs)-1].next
}

// Stats returns counters since Open.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Dir is the directory of the log.
func (l *Log) Dir() string { return l.dir }

// Wait returns a channel that is closed once a record at or above offset is
// visible (at once if one already is), for readers that follow the tail.
func (l *Log) Wait(offset uint64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.segs[len(l.segs)-1].next > offset {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	l.waiters = true
	return l.notify
}

// RemoveBefore deletes whole segments all of whose records are below
// offset, and returns how many segments were removed. The log never forgets
// its next offset: when offset covers every record, the active segment too,
// the active segment is replaced by an empty one starting at offset, so a
// fully consumed log takes no space however little of its segment size was
// used. An offset beyond NextOffset moves the log forward: the next append
// gets offset, and the offsets in between are never used (a caller that
// knows it consumed up to offset, such as the agent with its acknowledged
// watermark after a repair, uses this so that no offset is used twice).
// The active segment is kept while an append is using it; a later call
// replaces it. It is replaced by a new file, or, when none can be created
// (a full disk) or offset is beyond NextOffset, its own file is renamed
// and emptied (not while a reader is using it); either way a crash leaves a
// log whose next offset is offset or where it was (see the package
// documentation).
func (l *Log) RemoveBefore(offset uint64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	active := l.segs[len(l.segs)-1]
	// Rolling needs the active segment quiet: nothing being written or
	// queued (l.next is then active.next) and the log not broken.
	roll := offset >= l.next && offset > active.base && !l.flushing && l.pending.n == 0 && l.broken == nil
	gap := roll && offset > l.next
	if gap && active.refs > 0 {
		roll, gap = false, false // its file is reused below; wait for the reader
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].next <= offset {
		n++
	}
	var fresh *segment
	// reuse: the active segment's own file becomes the new segment (see
	// reuseActive) instead of a new file replacing it.
	reuse := gap
	if roll && !gap && l.unsynced {
		// As when a segment is sealed: its data must be durable before a
		// later segment exists, or a crash could leave a torn record in a
		// segment that is no longer the last.
		if err := active.f.Datasync(); err != nil {
			l.cfg.logger.Warn("seglog: cannot sync the consumed active segment; keeping it", "dir", l.dir, "err", err)
			roll = false
		} else {
			l.unsynced, l.durable = false, max(l.durable, active.next)
		}
	}
	if roll && !gap {
		// Create the new segment before removing the old one: a crash in
		// between leaves two contiguous segments.
		var err error
		if fresh, err = l.createSegment(offset); err != nil {
			if active.refs > 0 {
				l.cfg.logger.Warn("seglog: cannot replace the consumed active segment; keeping it", "dir", l.dir, "err", err)
				roll = false
			} else {
				// A full disk can refuse even an empty file (no inode
				// left, a copy-on-write filesystem) that only removing
				// the consumed segment would make room for: reuse its
				// file.
				l.cfg.logger.Info("seglog: cannot create a segment; reusing the consumed active segment's file", "dir", l.dir, "err", err)
				reuse = true
			}
		}
	}
	if n == 0 && !roll {
		return 0, nil
	}
	removed, err := l.removeFirst(n)
	if err != nil {
		if fresh != nil {
			fresh.f.Close()
			_ = l.cfg.fs.Remove(fresh.path)
		}
		return removed, err
	}
	if roll && !reuse {
		removed2, err := l.removeFirst(1) // the old active segment
		if err != nil {
			fresh.f.Close()
			_ = l.cfg.fs.Remove(fresh.path)
			return removed, err
		}
		removed += removed2
	}
	if reuse {
		if removed > 0 {
			// The older segments must be gone for good before the active
			// one is renamed past them, or Open could find them beside a
			// segment that does not follow on.
			if err := l.cfg.fs.SyncDir(l.dir); err != nil {
				return removed, fmt.Errorf("seglog: sync dir %s: %w", l.dir, err)
			}
		}
		if fresh, err = l.reuseActive(active, offset); err != nil {
			return removed, err
		}
		l.segs = l.segs[:0]
		removed++
		l.stats.SegmentsRemove++
	}
	if roll {
		l.segs = append(l.segs, fresh)
		l.next, l.tailBase, l.tailSize = offset, offset, 0
		l.durable = max(l.durable, offset)
		l.lastIndexed = -l.cfg.indexInterval
	}
	if err := l.cfg.fs.SyncDir(l.dir); err != nil {
		return removed, fmt.Errorf("seglog: sync dir %s: %w", l.dir, err)
	}
	return removed, nil
}

// reuseActive turns the active segment, all of whose records are
// consumed, into an empty segment starting at offset, in its own file: it
// needs no space on the disk, and moves the log forward past offsets it
// never used (the gap of RemoveBefore). A new segment at offset must never
// exist beside an older one (Open would see a hole between them), and the
// directory never be without a segment, so the file is renamed, then
// emptied. The name is what tells Open where the log goes on: a crash
// after the rename leaves the consumed records under the new name, whose
// first record is then below the segment's base, and Open empties it (see
// openSegment); a crash before it leaves the log as it was. Caller holds
// mu; the active segment has no reader.
func (l *Log) reuseActive(active *segment, offset uint64) (*segment, error) {
	newPath := filepath.Join(l.dir, segmentName(offset))
	if err := l.cfg.fs.Rename(active.path, newPath); err != nil {
		return nil, fmt.Errorf("seglog: rename %s: %w", active.path, err) // nothing changed
	}
	_ = l.cfg.fs.Remove(filepath.Join(l.dir, indexName(active.base)))
	// From here on the log in memory no longer matches the disk until
	// the file is empty: a failure leaves it for Open to finish.
	if err := l.cfg.fs.SyncDir(l.dir); err != nil {
		l.broken = fmt.Errorf("%w: sync dir %s after renaming %s: %v", ErrBroken, l.dir, active.path, err)
		return nil, l.broken
	}
	if err := active.f.Truncate(0); err != nil {
		l.broken = fmt.Errorf("%w: empty %s: %v", ErrBroken, newPath, err)
		return nil, l.broken
	}
	if err := active.f.Datasync(); err != nil {
		l.broken = fmt.Errorf("%w: fdatasync %s: %v", ErrBroken, newPath, err)
		return nil, l.broken
	}
	return &segment{base: offset, path: newPath, f: active.f, next: offset}, nil
}

// removeFirst deletes the n oldest segments (their files stay open while a
// reader uses them). Caller holds mu.
func (l *Log) removeFirst(n int) (int, error) {
	for i, s := range l.segs[:n] {
		if err := l.cfg.fs.Remove(s.path); err != nil && !os.IsNotExist(err) {
			l.segs = append(l.segs[:0:0], l.segs[i:]...)
			l.stats.SegmentsRemove += uint64(i)
			return i, fmt.Errorf("seglog: remove %s: %w", s.path, err)
		}
		_ = l.cfg.fs.Remove(filepath.Join(l.dir, indexName(s.base)))
		s.removed = true
		if s.refs == 0 {
			s.f.Close()
		}
	}
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	l.stats.SegmentsRemove += uint64(n)
	return n, nil
}

// Close waits for in-progress appends, syncs (unless SyncNone) and closes
// the files. Readers get ErrClosed afterwards.
func (l *Log) Close() error {
	l.mu.Lock()
	for l.flushing {
		l.cond.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.waiters {
		close(l.notify)
		l.notify, l.waiters = nil, false
	}
	l.mu.Unlock()
	if l.stopSync != nil {
		close(l.stopSync)
		l.syncerRun.Wait()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.broken == nil && l.unsynced {
		err = l.segs[len(l.segs)-1].f.Datasync()
	}
	if err == nil && l.broken == nil && l.reserved > l.next {
		// Everything is durable: a clean restart need skip nothing.
		if rerr := l.writeReservation(l.next); rerr != nil {
			l.cfg.logger.Warn("seglog: the offset reservation was not lowered; the next Open skips to it", "dir", l.dir, "err", rerr)
		}
	}
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (l *Log) closeFiles() error {
	var err error
	for _, s := range l.segs {
		if s.refs == 0 {
			if cerr := s.f.Close(); err == nil {
				err = cerr
			}
		}
		s.removed = true
	}
	return err
}

// release drops a reader's reference. Caller holds mu.
func (l *Log) release(s *segment) {
	s.refs--
	if s.refs == 0 && s.removed {
		s.f.Close()
	}
}
