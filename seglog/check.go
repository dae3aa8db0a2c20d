package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Problem is one defect Check found: the damaged bytes [Pos, End) of File,
// and the record offsets [Offset, Offset+Lost) that no intact record holds.
type Problem struct {
	File   string // segment path
	Pos    int64  // byte position of the first bad byte
	End    int64  // byte position where intact data resumes (or the file ends)
	Offset uint64 // record offset expected at Pos
	Lost   uint64 // offsets from Offset on that have no intact record
	// Torn is true for a bad final record of the last segment, which Open
	// would truncate by itself.
	Torn bool
	// Damaged (with Torn): that record was damaged after it was written
	// whole, not torn by a crash (damagedTail); Open copies its bytes to
	// the quarantine before it truncates them.
	Damaged bool
	Reason  string
}

func (p Problem) String() string {
	kind := "corrupt"
	switch {
	case p.Torn && p.Damaged:
		kind = "damaged final record (the next open quarantines it)"
	case p.Torn:
		kind = "torn tail"
	}
	s := fmt.Sprintf("%s: %s at byte %d (offset %d): %s", p.File, kind, p.Pos, p.Offset, p.Reason)
	if p.End > p.Pos {
		s += fmt.Sprintf("; %d damaged bytes [%d, %d)", p.End-p.Pos, p.Pos, p.End)
	}
	if p.Lost > 0 {
		s += fmt.Sprintf("; record offsets [%d, %d) lost", p.Offset, p.Offset+p.Lost)
	}
	return s
}

// Report is the result of Check.
type Report struct {
	Segments int
	Records  uint64 // intact records (after Repair: the records kept)
	Bytes    int64
	First    uint64 // first offset
	Next     uint64 // offset after the last intact record
	// Gaps counts offsets without a record: lost in the damage found now,
	// or in damage an earlier Repair removed.
	Gaps     uint64
	Problems []Problem
	// Quarantined is the number of damaged bytes (moved to the quarantine
	// by Repair).
	Quarantined int64
	Recovered   []string // with Repair: files written to the quarantine
}

// Summary is the one-line outcome of a repair: "kept N records,
// quarantined M bytes at offsets FILE:POS-END (record offsets [A, B) lost),
// ...".
func (r *Report) Summary() string {
	var at []string
	for _, p := range r.Problems {
		s := fmt.Sprintf("%s:%d-%d", filepath.Base(p.File), p.Pos, p.End)
		if p.Lost > 0 {
			s += fmt.Sprintf(" (record offsets [%d, %d) lost)", p.Offset, p.Offset+p.Lost)
		}
		at = append(at, s)
	}
	if len(at) == 0 {
		at = []string{"none"}
	}
	return fmt.Sprintf("kept %d records, quarantined %d bytes at offsets %s", r.Records, r.Quarantined, strings.Join(at, ", "))
}

// Check verifies every record of every segment in dir without changing
// anything, and reports every problem it finds: bad records, gaps between
// segments, and torn tails. It needs no lock and may run while a process
// appends to the log: a segment that RemoveBefore deletes meanwhile makes
// it start over, and an append in progress can show as a torn tail.
func Check(dir string, opts ...Option) (*Report, error) {
	return check(dir, false, opts)
}

// Repair is Check followed by a salvage. Every damaged byte range is copied
// to dir/quarantine/, and each damaged segment is rewritten with every
// intact record, before and after the damage, at its original offset; the
// offsets the damage held are covered by a gap frame, which Open and the
// iterators skip. Intact segments are not touched. A torn tail of the last
// segment is quarantined and cut, as Open would. The caller must hold the
// log exclusively (no process may have it open).
func Repair(dir string, opts ...Option) (*Report, error) {
	return check(dir, true, opts)
}

// checkMaxBody is the record size limit Check and Repair apply, whatever
// WithMaxRecordBytes says: the process that wrote the log may have allowed
// larger records than the caller knows of, and quarantining an intact record
// for its size would lose it. Salvage works on the segment in memory, so a
// damaged length field cannot make it allocate more.
const checkMaxBody = MaxRecordLimit

// errVanished: a segment listed a moment ago is gone (RemoveBefore in a
// running process); a read-only check starts over.
var errVanished = errors.New("segment removed during the check")

func check(dir string, repair bool, opts []Option) (*Report, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		rep, err := checkOnce(dir, repair, cfg)
		if errors.Is(err, errVanished) && !repair && attempt < 10 {
			continue
		}
		return rep, err
	}
}

// damaged is a segment that Repair must rewrite. Its bytes are read again
// then (the caller holds the log exclusively, so they are the same), so
// that only one segment is in memory at a time.
type damaged struct {
	base  uint64
	limit uint64 // base of the next segment, unless last
	path  string
	size  int // bytes salvage classified
	last  bool
}

func checkOnce(dir string, repair bool, cfg config) (*Report, error) {
	bases, err := listSegments(cfg.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("seglog: list %s: %w", dir, err)
	}
	rep := &Report{Segments: len(bases)}
	if len(bases) > 0 {
		rep.First, rep.Next = bases[0], bases[0]
	}
	var fix []damaged
	for i, base := range bases {
		path := filepath.Join(dir, segmentName(base))
		last := i == len(bases)-1
		data, err := readSegment(cfg.fs, path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return rep, fmt.Errorf("%w: %s", errVanished, path)
			}
			return rep, err
		}
		var limit uint64
		if !last {
			limit = bases[i+1]
		}
		// Bounding each segment by the next one's base means a segment
		// that overlaps its successor is cut there, and one that ends short
		// of it reports the missing offsets.
		spans := salvage(data, base, limit, !last, checkMaxBody)
		rep.Next = base
		var bad bool
		for j, s := range spans {
			if s.damaged {
				bad = true
				final := last && j == len(spans)-1
				var dmg bool
				if final {
					_, derr := decodeFrame(data[s.pos:], checkMaxBody)
					dmg = damagedRecord(derr, data[s.pos:], s.pos)
				}
				rep.Problems = append(rep.Problems, Problem{File: path, Pos: s.pos, End: s.end,
					Offset: s.first, Lost: s.next - s.first, Reason: s.reason, Torn: final, Damaged: dmg})
				rep.Quarantined += s.end - s.pos
				rep.Gaps += s.next - s.first
				if !(last && j == len(spans)-1) {
					rep.Next = s.next
				}
				continue
			}
			rep.Records += uint64(s.records)
			if cfg.visit != nil {
				visitSpan(data[s.pos:s.end], cfg.visit)
			}
			rep.Gaps += s.gaps
			rep.Bytes += s.end - s.pos
			rep.Next = s.next
		}
		if bad {
			fix = append(fix, damaged{base: base, limit: limit, path: path, size: len(data), last: last})
		}
	}
	if !repair || len(fix) == 0 {
		return rep, nil
	}
	qdir := filepath.Join(dir, "quarantine")
	if err := cfg.fs.MkdirAll(qdir, 0o755); err != nil {
		return rep, fmt.Errorf("seglog: create %s: %w", qdir, err)
	}
	for _, d := range fix {
		if err := repairSegment(cfg, dir, qdir, d, rep); err != nil {
			return rep, err
		}
	}
	if err := cfg.fs.SyncDir(dir); err != nil {
		return rep, err
	}
	return rep, nil
}

// visitSpan calls visit with each data record of an intact span, which
// salvage decoded already: every frame decodes.
func visitSpan(b []byte, visit func(uint64, []byte)) {
	for len(b) > 0 {
		fr, err := decodeFrame(b, checkMaxBody)
		if err != nil || fr.size <= 0 {
			return
		}
		if fr.gap == 0 {
			visit(fr.offset, fr.body)
		}
		b = b[fr.size:]
	}
}

// repairSegment quarantines the damaged bytes of one segment and replaces
// it with its salvaged content.
func repairSegment(cfg config, dir, qdir string, d damaged, rep *Report) error {
	data, err := readSegment(cfg.fs, d.path)
	if err != nil {
		return err
	}
	if len(data) != d.size {
		return fmt.Errorf("seglog: %s changed during the repair (%d bytes, then %d): is a process using the log?", d.path, d.size, len(data))
	}
	spans := salvage(data, d.base, d.limit, !d.last, checkMaxBody)
	// Quarantine first, durably: if Repair dies before the segment is
	// replaced, running it again finds the same damage.
	for _, s := range spans {
		if !s.damaged || s.end == s.pos {
			continue
		}
		name := quarantineName(segmentName(d.base), s.pos)
		dst, err := writeNew(cfg.fs, qdir, name, data[s.pos:s.end])
		if err != nil {
			return fmt.Errorf("seglog: quarantine %s: %w", d.path, err)
		}
		rep.Recovered = append(rep.Recovered, dst)
	}
	if err := cfg.fs.SyncDir(qdir); err != nil {
		return err
	}
	return replaceSegment(cfg.fs, dir, d.base, rebuild(data, spans, d.last))
}

// readSegment reads a whole segment. Salvage needs random access around
// damage; segments are bounded by WithSegmentBytes plus one record.
func readSegment(fs FS, path string) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("seglog: stat %s: %w", path, err)
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("seglog: read %s: %w", path, err)
	}
	return data[:n], nil
}

// writeNew writes data to a new file in dir named name (or name.1, name.2,
// ... if taken, so an earlier repair's quarantine is never overwritten) and
// syncs it. A file of those names that already holds exactly data is kept
// and its path returned: the copy of an open or repair that crashed after
// it and before cutting the bytes out of the segment, which the next one
// would otherwise copy again.
func writeNew(fs FS, dir, name string, data []byte) (string, error) {
	for i := 0; i < 1000; i++ {
		path := filepath.Join(dir, name)
		if i > 0 {
			path = fmt.Sprintf("%s.%d", path, i)
		}
		f, err := fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if errors.Is(err, os.ErrExist) {
			if old, rerr := readSegment(fs, path); rerr == nil && bytes.Equal(old, data) {
				return path, nil
			}
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.WriteAt(data, 0)
		if err == nil {
			err = f.Datasync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return path, err
	}
	return "", fmt.Errorf("too many quarantine files named %s", name)
}

// replaceSegment atomically replaces a segment with new content: a
// temporary file, synced, renamed over it. Its index no longer matches and
// is removed first (Open rebuilds it).
func replaceSegment(fs FS, dir string, base uint64, content []byte) error {
	path := filepath.Join(dir, segmentName(base))
	tmp := path + ".tmp"
	if err := fs.Remove(filepath.Join(dir, indexName(base))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("seglog: remove index of %s: %w", path, err)
	}
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("seglog: rewrite %s: %w", path, err)
	}
	if len(content) > 0 {
		_, err = f.WriteAt(content, 0)
	}
	if err == nil {
		err = f.Datasync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("seglog: rewrite %s: %w", path, err)
	}
	return nil
}
