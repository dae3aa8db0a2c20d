package seglog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Problem is one defect Check found.
type Problem struct {
	File   string // segment path
	Pos    int64  // byte position of the first bad byte
	Offset uint64 // record offset expected there
	// Torn is true for a bad final record of the last segment, which Open
	// would truncate by itself.
	Torn   bool
	Reason string
}

func (p Problem) String() string {
	kind := "corrupt"
	if p.Torn {
		kind = "torn tail"
	}
	return fmt.Sprintf("%s: %s at byte %d (offset %d): %s", p.File, kind, p.Pos, p.Offset, p.Reason)
}

// Report is the result of Check.
type Report struct {
	Segments  int
	Records   uint64
	Bytes     int64
	First     uint64 // first offset
	Next      uint64 // offset after the last good record
	Problems  []Problem
	Recovered []string // with Repair: files written to the quarantine
}

// Check verifies every record of every segment in dir without changing
// anything, and reports every problem it finds: bad records, gaps between
// segments, and torn tails.
func Check(dir string, opts ...Option) (*Report, error) {
	return check(dir, false, opts)
}

// Repair is Check followed by a fix: from the first damaged record on, the
// bytes of its segment and every later segment are moved to
// dir/quarantine/, and the segment is cut to its good records, so every good
// record before the damage is kept and offsets stay contiguous.
func Repair(dir string, opts ...Option) (*Report, error) {
	return check(dir, true, opts)
}

func check(dir string, repair bool, opts []Option) (*Report, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	bases, err := listSegments(cfg.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("seglog: list %s: %w", dir, err)
	}
	rep := &Report{Segments: len(bases)}
	if len(bases) > 0 {
		rep.First, rep.Next = bases[0], bases[0]
	}
	cut := -1 // index of the first damaged segment
	var cutPos int64
	for i, base := range bases {
		path := filepath.Join(dir, segmentName(base))
		f, err := cfg.fs.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("seglog: open %s: %w", path, err)
		}
		if cut < 0 && base != rep.Next {
			rep.Problems = append(rep.Problems, Problem{File: path, Offset: rep.Next,
				Reason: fmt.Sprintf("segment starts at offset %d, expected %d", base, rep.Next)})
			cut, cutPos = i, 0
		}
		r, err := scanSegment(f, base, cfg.maxRecordBytes, cfg.indexInterval)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("seglog: read %s: %w", path, err)
		}
		if cut < 0 {
			rep.Records += uint64(r.records)
			rep.Bytes += r.size
			rep.Next = r.next
		}
		if r.bad != nil {
			p := Problem{File: path, Pos: r.size, Offset: r.next, Reason: r.bad.Error()}
			found, at, err := validAfter(f, r.size, r.next, cfg.maxRecordBytes)
			if err != nil {
				f.Close()
				return nil, err
			}
			p.Torn = i == len(bases)-1 && !found
			if found {
				p.Reason += fmt.Sprintf("; valid data follows at byte %d", at)
			}
			rep.Problems = append(rep.Problems, p)
			if cut < 0 {
				cut, cutPos = i, r.size
			}
		}
		f.Close()
	}
	if !repair || cut < 0 {
		return rep, nil
	}
	qdir := filepath.Join(dir, "quarantine")
	if err := cfg.fs.MkdirAll(qdir, 0o755); err != nil {
		return rep, err
	}
	for i := cut; i < len(bases); i++ {
		path := filepath.Join(dir, segmentName(bases[i]))
		_ = cfg.fs.Remove(filepath.Join(dir, indexName(bases[i])))
		if i == cut && cutPos > 0 {
			dst := filepath.Join(qdir, fmt.Sprintf("%s.%d.broken", segmentName(bases[i]), cutPos))
			if err := moveTail(cfg.fs, path, cutPos, dst); err != nil {
				return rep, err
			}
			rep.Recovered = append(rep.Recovered, dst)
			continue
		}
		dst := filepath.Join(qdir, segmentName(bases[i])+".broken")
		if err := cfg.fs.Rename(path, dst); err != nil {
			return rep, fmt.Errorf("seglog: quarantine %s: %w", path, err)
		}
		rep.Recovered = append(rep.Recovered, dst)
	}
	if err := cfg.fs.SyncDir(qdir); err != nil {
		return rep, err
	}
	if err := cfg.fs.SyncDir(dir); err != nil {
		return rep, err
	}
	if cutPos == 0 && cut == 0 {
		// Nothing good is left; the next Open starts an empty log at the
		// first offset so offsets are never reused.
		s, err := (&Log{dir: dir, cfg: cfg}).createSegment(bases[0])
		if err != nil {
			return rep, err
		}
		s.f.Close()
	}
	return rep, nil
}

// moveTail copies bytes [pos, EOF) of path to dst (synced), then truncates
// path at pos.
func moveTail(fs fsys, path string, pos int64, dst string) error {
	src, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	size, err := src.Size()
	if err != nil {
		return err
	}
	tail := make([]byte, size-pos)
	if _, err := src.ReadAt(tail, pos); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	out, err := fs.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = out.WriteAt(tail, 0)
	if err == nil {
		err = out.Datasync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("seglog: quarantine %s: %w", path, err)
	}
	if err := src.Truncate(pos); err != nil {
		return err
	}
	return src.Datasync()
}
