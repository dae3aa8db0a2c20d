package seglog

import (
	"fmt"
	"io"
	"sort"
)

// Iterator reads records in offset order. It reads the segment files in
// chunks of at most its byte budget (a single larger record is read whole),
// so memory stays bounded however far behind the reader is. It is safe to
// use while appends go on: it sees every record that was visible when it
// reached it, and Next returns false at the current end; a later Next
// continues once more is appended (see Log.Wait). An Iterator is not safe
// for concurrent use.
type Iterator struct {
	l      *Log
	budget int
	buf    []byte

	next uint64 // offset of the next record to return

	// The undecoded part of the last chunk read: data starts at byte
	// dataPos of segment dataSeg and holds records from offset expect on.
	data    []byte
	dataSeg *segment
	dataPos int64
	expect  uint64
	// chunkAtEnd: the chunk reaches the end of the segment's visible data,
	// so a record cut short in it is damage, not the budget.
	chunkAtEnd bool

	off uint64
	val []byte
	err error
}

// NewIterator returns an iterator positioned at offset from, reading at
// most budget bytes per chunk.
func (l *Log) NewIterator(from uint64, budget int) *Iterator {
	if budget < 4<<10 {
		budget = 4 << 10
	}
	return &Iterator{l: l, budget: budget, next: from}
}

// Next advances to the next record. It returns false at the end of the
// visible log or on error (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	for {
		if len(it.data) > 0 {
			fr, err := decodeFrame(it.data, it.l.cfg.maxRecordBytes)
			if err == errShort && !it.chunkAtEnd {
				it.data = nil // cut by the budget: read on from this record
				continue
			}
			if size := frameSizeAt(it.data); err == errChecksum && it.expect < it.next && !(it.chunkAtEnd && size >= len(it.data)) {
				// A damaged record before the one asked for, between
				// the index entry and it. Only its checksum failed, so
				// its header passed every check: step over it by its
				// length. The length may be what was damaged; then the
				// step lands where no record starts, and the next
				// decode fails as damage (a frame there must pass its
				// checksum and hold the next offset), or at the end of
				// the segment, which is damage too (here and in fill).
				// Without this a reader that skipped the damaged record
				// met it again on every record up to the next index
				// entry.
				it.data = it.data[size:]
				it.dataPos += int64(size)
				it.expect++
				continue
			}
			if err == nil && fr.offset != it.expect {
				err = fmt.Errorf("record has offset %d", fr.offset)
			}
			if err != nil {
				it.err = &CorruptionError{File: it.dataSeg.path, Pos: it.dataPos, Offset: it.expect, Reason: err.Error()}
				return false
			}
			it.data = it.data[fr.size:]
			it.dataPos += int64(fr.size)
			it.expect = fr.end()
			if fr.gap > 0 {
				// Offsets Repair found no intact record for: skip them,
				// so the next record keeps its own offset.
				it.next = max(it.next, it.expect)
				continue
			}
			if fr.offset < it.next {
				continue // between the index entry and the requested offset
			}
			it.off, it.val, it.next = fr.offset, fr.body, fr.offset+1
			return true
		}
		ok, err := it.fill()
		if err != nil {
			it.err = err
			return false
		}
		if !ok {
			return false
		}
	}
}

// Offset is the offset of the current record.
func (it *Iterator) Offset() uint64 { return it.off }

// Value is the current record. It aliases the iterator's buffer and is
// valid until the next call to Next.
func (it *Iterator) Value() []byte { return it.val }

// Err is the error that stopped the iteration, if any: ErrTruncated when the
// position was removed by RemoveBefore, a *CorruptionError, or ErrClosed.
func (it *Iterator) Err() error { return it.err }

// Seek repositions the iterator at offset from.
func (it *Iterator) Seek(from uint64) {
	it.next, it.data, it.dataSeg, it.err = from, nil, nil, nil
}

// fill reads the next chunk. It reports false when the iterator is at the
// end of the visible log.
func (it *Iterator) fill() (bool, error) {
	l := it.l
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false, ErrClosed
	}
	if it.next < l.segs[0].base {
		l.mu.Unlock()
		return false, fmt.Errorf("%w: offset %d, first is %d", ErrTruncated, it.next, l.segs[0].base)
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].next > it.next })
	if i == len(l.segs) {
		l.mu.Unlock()
		return false, nil
	}
	s := l.segs[i]
	var pos int64
	var expect uint64
	if s == it.dataSeg && it.expect <= it.next {
		pos, expect = it.dataPos, it.expect // sequential: no index lookup
	} else {
		pos = s.lookup(it.next)
		j := sort.Search(len(s.index), func(j int) bool { return s.index[j].offset > it.next })
		expect = s.base
		if j > 0 {
			expect = s.index[j-1].offset
		}
	}
	end := s.size
	if pos >= end {
		// The segment holds it.next (s.next > it.next), so a record
		// should start here: a damaged length stepped past it (Next).
		l.mu.Unlock()
		return false, &CorruptionError{File: s.path, Pos: pos, Offset: expect, Reason: "no record where one should start"}
	}
	s.refs++
	l.mu.Unlock()

	n, err := it.read(s, pos, end)

	l.mu.Lock()
	l.release(s)
	l.mu.Unlock()
	if err != nil {
		return false, err
	}
	it.data, it.dataSeg, it.dataPos, it.expect = it.buf[:n], s, pos, expect
	it.chunkAtEnd = pos+int64(n) >= end
	return true, nil
}

// read loads up to budget bytes of segment s from pos (never beyond end),
// growing the chunk if the first record is larger.
func (it *Iterator) read(s *segment, pos, end int64) (int, error) {
	want := min(int64(it.budget), end-pos)
	for {
		if int64(cap(it.buf)) < want {
			it.buf = make([]byte, want)
		}
		buf := it.buf[:want]
		n, err := s.f.ReadAt(buf, pos)
		if err != nil && !(err == io.EOF && int64(n) == want) {
			return 0, fmt.Errorf("seglog: read %s at %d: %w", s.path, pos, err)
		}
		need := int64(frameSizeAt(buf))
		if need <= want || want == end-pos {
			return n, nil
		}
		want = min(need, end-pos)
	}
}
