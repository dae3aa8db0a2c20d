package seglog

import (
	"encoding/binary"
	"fmt"
)

// span is a run of a segment's bytes that salvage classified: either intact
// frames carrying offsets [first, next), or damage whose bytes are [pos, end)
// and whose lost offsets are [first, next) (possibly none).
type span struct {
	pos, end    int64
	first, next uint64
	damaged     bool
	records     int    // data records in an intact span
	gaps        uint64 // offsets covered by gap frames in an intact span
	reason      string // why the damage starts where it does
	err         error  // the decoding error behind reason
}

// salvage classifies every byte of one segment. base is the segment's first
// offset. When bounded, limit is the base of the next segment: no frame may
// reach it, and offsets the segment does not account for up to limit are
// reported as lost (a damaged span, possibly of zero bytes, at the end).
//
// After damage at pos, salvage resynchronizes on the first 8-aligned
// position after it where a frame decodes, has an offset at or above the
// one expected (and below limit), and is confirmed by what follows: the next
// frame decodes with the offset after it, or it ends the data. The offset
// inside the checksummed header is what makes this safe: a frame that merely
// looks valid inside a damaged body would also need the right offset and a
// valid successor (or, in the last segment, a torn write after it).
//
// It works on the segment's bytes in memory so that the same pure function
// serves Check, Repair and the fuzz test; any input gives spans, never a
// panic. The spans are contiguous and cover [0, len(data)).
func salvage(data []byte, base, limit uint64, bounded bool, maxBody int) []span {
	var spans []span
	expect := base
	good := span{first: base, next: base}
	pos := int64(0)
	size := int64(len(data))
	closeGood := func() {
		if good.end > good.pos {
			spans = append(spans, good)
		}
	}
	for pos < size {
		fr, err := decodeFrame(data[pos:], maxBody)
		if err == nil {
			err = frameFits(fr, expect, limit, bounded)
		}
		if err == nil {
			expect = fr.end()
			pos += int64(fr.size)
			good.end, good.next = pos, expect
			if fr.gap > 0 {
				good.gaps += fr.gap
			} else {
				good.records++
			}
			continue
		}
		closeGood()
		q, fr, found := resync(data, pos, expect, limit, bounded, maxBody)
		bad := span{pos: pos, end: size, first: expect, next: expect, damaged: true, reason: err.Error(), err: err}
		if !found {
			if bounded {
				bad.next = limit
			}
			spans = append(spans, bad)
			return spans
		}
		bad.end, bad.next = q, fr.offset
		spans = append(spans, bad)
		expect, pos = fr.offset, q
		good = span{pos: q, end: q, first: expect, next: expect}
	}
	closeGood()
	if bounded && expect < limit {
		spans = append(spans, span{pos: size, end: size, first: expect, next: limit, damaged: true,
			reason: fmt.Sprintf("the segment ends at offset %d but the next one starts at %d (missing data)", expect, limit)})
	}
	return spans
}

// frameFits checks a decoded frame against the offset expected at its
// position and the start of the next segment.
func frameFits(fr frame, expect, limit uint64, bounded bool) error {
	if fr.offset != expect {
		return fmt.Errorf("record has offset %d, expected %d", fr.offset, expect)
	}
	if bounded && fr.end() > limit {
		return fmt.Errorf("record offset %d reaches the next segment, which starts at %d", fr.end()-1, limit)
	}
	return nil
}

// resync finds the first frame after the damage at pos where intact data
// resumes (see salvage).
func resync(data []byte, pos int64, expect, limit uint64, bounded bool, maxBody int) (int64, frame, bool) {
	for q := pos + 8; q+headerSize <= int64(len(data)); q += 8 {
		if data[q+4] != formatVersion || (data[q+5] != typeData && data[q+5] != typeGap) || data[q+6] != 0 || data[q+7] != 0 {
			continue
		}
		// The offset check first: it is cheap, and it rules out most
		// look-alike headers before a checksum over their body.
		if off := binary.LittleEndian.Uint64(data[q+8:]); off < expect || (bounded && off >= limit) {
			continue
		}
		fr, err := decodeFrame(data[q:], maxBody)
		if err != nil || fr.offset < expect || (bounded && fr.end() > limit) {
			continue
		}
		after := q + int64(fr.size)
		if after == int64(len(data)) {
			return q, fr, true
		}
		nx, err := decodeFrame(data[after:], maxBody)
		if err == nil && nx.offset == fr.end() && (!bounded || nx.end() <= limit) {
			return q, fr, true
		}
		if !bounded && (err == errShort || err == errZero) {
			// The last segment may end in a torn write right after it.
			return q, fr, true
		}
	}
	return 0, frame{}, false
}

// rebuild returns the salvaged content of a segment: every intact span as
// it was, and a gap frame for the lost offsets of every damaged span except
// a torn tail (damage at the very end of the last segment, which Open
// truncates without a gap, as it does for a crash mid-append). A final
// record damaged after it was written whole keeps its offset with a gap,
// as Open keeps it (damagedRecord).
func rebuild(data []byte, spans []span, last bool) []byte {
	out := make([]byte, 0, len(data)+32)
	for i, s := range spans {
		if !s.damaged {
			out = append(out, data[s.pos:s.end]...)
			continue
		}
		if last && i == len(spans)-1 {
			if !mutationReuseDamagedOffset && s.err != nil && damagedRecord(s.err, data[s.pos:s.end], s.pos) {
				out = appendGap(out, s.first, 1)
			}
			break
		}
		if s.next > s.first {
			out = appendGap(out, s.first, s.next-s.first)
		}
	}
	return out
}
