package seglog

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
)

// TestModel runs random appends, reads, removals and reopens against an
// in-memory model of the log: a first offset and a slice of records.
func TestModel(t *testing.T) {
	seeds := 30
	if s, err := strconv.Atoi(os.Getenv("SLUICE_MODEL_SEEDS")); err == nil {
		seeds = s
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	opts := []Option{WithSegmentBytes(int64(4096 + rng.Intn(16384))), WithIndexInterval(int64(64 + rng.Intn(1024))), WithSync(SyncNone())}
	l := openT(t, dir, opts...)
	defer func() { l.Close() }()
	var first uint64
	var model [][]byte
	for step := 0; step < 400; step++ {
		switch op := rng.Intn(100); {
		case op < 50: // append a batch
			n := 1 + rng.Intn(8)
			batch := make([][]byte, n)
			for i := range batch {
				batch[i] = randRecord(rng)
			}
			off := appendT(t, l, batch...)
			if want := first + uint64(len(model)); off != want {
				t.Fatalf("seed %d step %d: append at %d, want %d", seed, step, off, want)
			}
			model = append(model, batch...)
		case op < 80: // read from a random offset with a random budget
			if len(model) == 0 {
				continue
			}
			from := first + uint64(rng.Intn(len(model)))
			it := l.NewIterator(from, 64+rng.Intn(8192))
			want := from
			for it.Next() {
				if it.Offset() != want || !bytes.Equal(it.Value(), model[want-first]) {
					t.Fatalf("seed %d step %d: read %d, want %d", seed, step, it.Offset(), want)
				}
				want++
			}
			if it.Err() != nil || want != first+uint64(len(model)) {
				t.Fatalf("seed %d step %d: read stopped at %d (err %v), want %d", seed, step, want, it.Err(), first+uint64(len(model)))
			}
		case op < 90: // remove below a random watermark
			if len(model) == 0 {
				continue
			}
			w := first + uint64(rng.Intn(len(model)+1))
			if _, err := l.RemoveBefore(w); err != nil {
				t.Fatal(err)
			}
			newFirst := l.FirstOffset()
			if newFirst > w || newFirst < first {
				t.Fatalf("seed %d step %d: first %d after removing below %d (was %d)", seed, step, newFirst, w, first)
			}
			model = model[newFirst-first:]
			first = newFirst
			if first > 0 {
				it := l.NewIterator(first-1, 4096)
				if it.Next() || !isTruncated(it.Err()) {
					t.Fatalf("seed %d: read below first: %v", seed, it.Err())
				}
			}
		default: // reopen
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openT(t, dir, opts...)
			if l.FirstOffset() != first || l.NextOffset() != first+uint64(len(model)) {
				t.Fatalf("seed %d step %d: reopened [%d,%d), want [%d,%d)", seed, step, l.FirstOffset(), l.NextOffset(), first, first+uint64(len(model)))
			}
		}
	}
}

func randRecord(rng *rand.Rand) []byte {
	n := rng.Intn(300)
	if rng.Intn(20) == 0 {
		n = rng.Intn(10000) // sometimes larger than a segment's remainder or the budget
	}
	b := make([]byte, n)
	rng.Read(b)
	return b
}
