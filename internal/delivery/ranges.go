package delivery

// Range is the inclusive interval [First, Last] of message ids. Acks carry
// ranges rather than id lists because group commit stores ids in long
// contiguous runs: one Range per run keeps an ack small whatever the batch
// size.
//
// Invariant of a well-formed Range: First <= Last. Steps reject ill-formed
// ranges with ErrInvalidEvent.
type Range struct{ First, Last uint64 }

// Contains reports whether id lies in r.
func (r Range) Contains(id uint64) bool { return r.First <= id && id <= r.Last }

// AppendRanges appends to dst the ranges covering exactly the ids and returns
// the extended slice. Existing elements of dst are left alone, even when the
// first new range touches the last old one.
//
// ids must be sorted in non-decreasing order; duplicates are fine. Sorting is
// left to the caller so that AppendRanges never allocates beyond growing dst:
// the Receiver sorts a reused scratch copy with slices.Sort. On unsorted input
// the result still covers exactly the input set, but is neither sorted nor
// minimal (every descent starts a new range).
func AppendRanges(dst []Range, ids []uint64) []Range {
	for i := 0; i < len(ids); {
		r := Range{First: ids[i], Last: ids[i]}
		for i++; i < len(ids); i++ {
			// ids[i] >= r.Last first, so that the subtraction cannot wrap:
			// that keeps unsorted input from fusing, say, MaxUint64 and 0.
			if ids[i] < r.Last || ids[i]-r.Last > 1 {
				break
			}
			r.Last = ids[i]
		}
		dst = append(dst, r)
	}
	return dst
}

// validRanges reports whether every range is well formed.
func validRanges(rs []Range) bool {
	for _, r := range rs {
		if r.First > r.Last {
			return false
		}
	}
	return true
}
