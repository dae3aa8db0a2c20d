package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const (
	segSuffix = ".seg"
	idxSuffix = ".idx"
	idxMagic  = "SLIX"
)

func segmentName(base uint64) string { return fmt.Sprintf("%020d%s", base, segSuffix) }
func indexName(base uint64) string   { return fmt.Sprintf("%020d%s", base, idxSuffix) }

// parseSegmentName returns the base offset of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	if !strings.HasSuffix(name, segSuffix) || len(name) != 20+len(segSuffix) {
		return 0, false
	}
	base, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
	return base, err == nil
}

// listSegments returns the base offsets of the segments in dir, ascending.
func listSegments(fs FS, dir string) ([]uint64, error) {
	entries, err := fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, e := range entries {
		if base, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

type indexEntry struct {
	offset uint64
	pos    int64
}

// segment is one file of the log. Fields other than base, path and f are
// guarded by Log.mu.
type segment struct {
	base uint64
	path string
	f    File

	// next is the offset after the last record readers may see; size is the
	// byte length of those records. Invariant: size is a multiple of 8 and
	// the file holds valid records for [base, next) in [0, size).
	next uint64
	size int64
	// index holds sparse (offset, position) pairs, ascending, first entry
	// (base, 0) once the segment holds a record.
	index  []indexEntry
	sealed bool
	// refs counts readers using f; a removed segment closes f when the last
	// reader is done.
	refs    int
	removed bool
}

// lookup returns the byte position from which to scan for offset off.
func (s *segment) lookup(off uint64) int64 {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].offset > off })
	if i == 0 {
		return 0
	}
	return s.index[i-1].pos
}

// scanResult is what a sequential pass over a segment found.
type scanResult struct {
	next    uint64 // offset after the last good record
	size    int64  // byte position after the last good record
	index   []indexEntry
	records int
	gaps    uint64 // offsets covered by gap frames (left by Repair)
	// bad is non-nil when the scan stopped before the end of the file.
	bad error
	// belowBase: the first record is valid but below the segment's base
	// (an interrupted roll, see Log.reuseActive).
	belowBase bool
	fileLen   int64
}

// scanSegment reads a segment from the start, verifying every record, and
// stops at the first record that does not decode or is not at the expected
// offset.
func scanSegment(f File, base uint64, maxBody int, interval int64) (scanResult, error) {
	fileLen, err := f.Size()
	if err != nil {
		return scanResult{}, err
	}
	r := scanResult{next: base, fileLen: fileLen}
	buf := make([]byte, 1<<20)
	var bufStart int64 // file position of buf[0]
	var n int          // valid bytes in buf
	lastIndexed := int64(-interval)
	pos := int64(0)
	for pos < fileLen {
		rel := int(pos - bufStart)
		if rel+headerSize > n || rel+frameSizeAt(buf[rel:n]) > n {
			// Refill from pos, large enough for the record if its length
			// field is plausible.
			need := frameSizeAt(buf[rel:n])
			if need < headerSize {
				need = headerSize
			}
			if need > maxBody+headerSize+8 {
				need = headerSize
			}
			// Never more than the file holds: a damaged length field must
			// not make Open allocate up to the record limit.
			need = int(min(int64(need), fileLen-pos))
			if need > len(buf) {
				buf = make([]byte, need)
			}
			bufStart, rel = pos, 0
			n, err = f.ReadAt(buf, pos)
			if err != nil && err != io.EOF {
				return r, err
			}
			// The first read at pos could not know the record's size (the
			// buffer did not hold its header): a record larger than the
			// buffer needs a second, large enough.
			if need := frameSizeAt(buf[:n]); need > n && need > len(buf) && need <= maxBody+headerSize+8 && int64(need) <= fileLen-pos {
				buf = make([]byte, need)
				n, err = f.ReadAt(buf, pos)
				if err != nil && err != io.EOF {
					return r, err
				}
			}
		}
		fr, derr := decodeFrame(buf[rel:n], maxBody)
		if derr == nil && fr.offset != r.next {
			derr = fmt.Errorf("record has offset %d", fr.offset)
			r.belowBase = pos == 0 && fr.offset < base
		}
		if derr != nil {
			r.bad = derr
			return r, nil
		}
		if pos-lastIndexed >= interval {
			r.index = append(r.index, indexEntry{offset: fr.offset, pos: pos})
			lastIndexed = pos
		}
		r.next = fr.end()
		if fr.gap > 0 {
			r.gaps += fr.gap
		} else {
			r.records++
		}
		pos += int64(fr.size)
		r.size = pos
	}
	return r, nil
}

// frameSizeAt returns the frame size announced by the header at the start of
// b, or 0 if b is too short to hold a length.
func frameSizeAt(b []byte) int {
	if len(b) < 4 {
		return 0
	}
	n := binary.LittleEndian.Uint32(b)
	if n > MaxRecordLimit {
		return 0
	}
	return frameSize(int(n))
}

// validAfter reports whether any valid record with an offset >= minOffset
// starts at an 8-aligned position after pos. It tells a torn final write
// (nothing valid follows) from damage in the middle of the data.
func validAfter(f File, pos int64, minOffset uint64, maxBody int) (bool, int64, error) {
	fileLen, err := f.Size()
	if err != nil {
		return false, 0, err
	}
	rest := make([]byte, fileLen-pos)
	if _, err := f.ReadAt(rest, pos); err != nil && err != io.EOF {
		return false, 0, err
	}
	for p := 8; p+headerSize <= len(rest); p += 8 {
		if rest[p+4] != formatVersion || (rest[p+5] != typeData && rest[p+5] != typeGap) {
			continue
		}
		if fr, err := decodeFrame(rest[p:], maxBody); err == nil && fr.offset >= minOffset {
			return true, pos + int64(p), nil
		}
	}
	return false, 0, nil
}

// writeIndex stores a sealed segment's sparse index next to it. A crash
// mid-write leaves a .tmp or a mismatching trailer; either way the index is
// rebuilt from the segment, so no sync is needed.
func writeIndex(fs FS, dir string, s *segment) error {
	buf := make([]byte, 0, 8+16*len(s.index)+24)
	buf = append(buf, idxMagic...)
	buf = binary.LittleEndian.AppendUint32(buf, 1)
	for _, e := range s.index {
		buf = binary.LittleEndian.AppendUint64(buf, e.offset)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(e.pos))
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(s.size))
	buf = binary.LittleEndian.AppendUint64(buf, s.next)
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	tmp := filepath.Join(dir, indexName(s.base)+".tmp")
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(buf, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return fs.Rename(tmp, filepath.Join(dir, indexName(s.base)))
}

var errIndexMismatch = errors.New("index does not match segment")

// readIndex loads a segment's index and checks it against the segment's
// length; any mismatch means the caller rebuilds it by scanning.
func readIndex(fs FS, dir string, base uint64, segLen int64) ([]indexEntry, uint64, error) {
	f, err := fs.OpenFile(filepath.Join(dir, indexName(base)), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, 0, err
	}
	if n < 8+20 || (n-8-20)%16 != 0 || n > 1<<30 {
		return nil, 0, errIndexMismatch
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, 0, err
	}
	body, sum := buf[:n-4], binary.LittleEndian.Uint32(buf[n-4:])
	if string(buf[:4]) != idxMagic || binary.LittleEndian.Uint32(buf[4:8]) != 1 || crc32.Checksum(body, castagnoli) != sum {
		return nil, 0, errIndexMismatch
	}
	size := int64(binary.LittleEndian.Uint64(buf[n-20:]))
	next := binary.LittleEndian.Uint64(buf[n-12:])
	if size != segLen || next < base {
		return nil, 0, errIndexMismatch
	}
	entries := make([]indexEntry, 0, (n-28)/16)
	for p := int64(8); p < n-20; p += 16 {
		e := indexEntry{offset: binary.LittleEndian.Uint64(buf[p:]), pos: int64(binary.LittleEndian.Uint64(buf[p+8:]))}
		if e.offset < base || e.offset >= next || e.pos < 0 || e.pos >= size {
			return nil, 0, errIndexMismatch
		}
		entries = append(entries, e)
	}
	return entries, next, nil
}
