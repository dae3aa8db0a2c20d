package delivery

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAppendRanges(t *testing.T) {
	tests := []struct {
		name string
		ids  []uint64
		want []Range
	}{
		{"empty", nil, nil},
		{"one", []uint64{7}, []Range{{7, 7}}},
		{"run", []uint64{3, 4, 5}, []Range{{3, 5}}},
		{"runs", []uint64{1, 2, 4, 6, 7, 8}, []Range{{1, 2}, {4, 4}, {6, 8}}},
		{"duplicates", []uint64{1, 1, 2, 2, 2, 3, 5, 5}, []Range{{1, 3}, {5, 5}}},
		{"top of the id space", []uint64{math.MaxUint64 - 1, math.MaxUint64}, []Range{{math.MaxUint64 - 1, math.MaxUint64}}},
		// Unsorted input: still an exact cover, but not minimal, and
		// MaxUint64 followed by 0 must not fuse.
		{"unsorted", []uint64{5, 6, 2, 3, 7}, []Range{{5, 6}, {2, 3}, {7, 7}}},
		{"wrap", []uint64{math.MaxUint64, 0}, []Range{{math.MaxUint64, math.MaxUint64}, {0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AppendRanges(nil, tt.ids); !slices.Equal(got, tt.want) {
				t.Fatalf("AppendRanges(%v) = %v, want %v", tt.ids, got, tt.want)
			}
		})
	}
	// dst is appended to, never merged with.
	if got := AppendRanges([]Range{{0, 1}}, []uint64{2}); !slices.Equal(got, []Range{{0, 1}, {2, 2}}) {
		t.Fatalf("append: %v", got)
	}
}

// Randomized: the ranges cover exactly the input set, sorted, disjoint and
// not adjacent (minimal).
func TestAppendRangesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		ids := make([]uint64, rng.IntN(50))
		for i := range ids {
			ids[i] = rng.Uint64N(64)
		}
		slices.Sort(ids)
		rs := AppendRanges(nil, ids)
		var cover []uint64
		for i, r := range rs {
			if r.First > r.Last || i > 0 && rs[i-1].Last+1 >= r.First {
				t.Fatalf("ranges %v not sorted, disjoint and minimal", rs)
			}
			for id := r.First; id <= r.Last; id++ {
				cover = append(cover, id)
			}
		}
		if want := slices.Compact(slices.Clone(ids)); !slices.Equal(cover, want) {
			t.Fatalf("ranges %v cover %v, want %v", rs, cover, want)
		}
	}
}

func TestRangeContains(t *testing.T) {
	r := Range{3, 5}
	for id, want := range map[uint64]bool{2: false, 3: true, 5: true, 6: false} {
		if r.Contains(id) != want {
			t.Errorf("%v.Contains(%d) = %t", r, id, !want)
		}
	}
}
