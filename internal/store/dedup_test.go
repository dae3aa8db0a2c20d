package store

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestIDSet checks IDSet against a map on random, mostly ordered ids.
func TestIDSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var s IDSet
		ref := map[uint64]bool{}
		next := uint64(rng.IntN(3))
		for range 400 {
			var id uint64
			switch rng.IntN(10) {
			case 0: // a resend of something older
				id = uint64(rng.Int64N(int64(next) + 1))
			case 1: // a gap
				next += uint64(1 + rng.IntN(3))
				id = next
			default:
				id = next
				next++
			}
			s.add(id)
			ref[id] = true
		}
		for id := range next + 5 {
			if s.has(id) != ref[id] {
				t.Fatalf("round %d: has(%d) = %v, want %v", round, id, s.has(id), ref[id])
			}
		}
		if w := s.wm; ref[w] || (w > 0 && !ref[w-1]) {
			t.Fatalf("round %d: watermark %d not at the first gap", round, w)
		}
		for i, r := range s.runs {
			if r.first > r.last || r.first <= s.wm || (i > 0 && r.first <= s.runs[i-1].last+1) {
				t.Fatalf("round %d: runs %v break the invariant (wm %d)", round, s.runs, s.wm)
			}
		}
	}
	// Contiguous ids keep no runs at all.
	var s IDSet
	for id := range uint64(10000) {
		s.add(id)
	}
	if s.wm != 10000 || len(s.runs) != 0 {
		t.Fatalf("contiguous ids: wm %d, %d runs", s.wm, len(s.runs))
	}
	// The largest id.
	s.add(math.MaxUint64)
	if !s.has(math.MaxUint64) || s.has(math.MaxUint64-1) {
		t.Fatal("MaxUint64 mishandled")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	d := NewDedup()
	d.Next = 77
	for _, id := range []uint64{0, 1, 2, 5, 6, 9, 20} {
		d.set("a").add(id)
	}
	d.set(strings.Repeat("b", 255)).add(3)
	d.set("c").add(math.MaxUint64)
	b := d.AppendCheckpoint(nil)
	got, err := ParseCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Next != 77 || len(got.agents) != 3 {
		t.Fatalf("parsed %+v", got)
	}
	for agent, s := range d.agents {
		g := got.agents[agent]
		if g == nil || g.wm != s.wm || len(g.runs) != len(s.runs) {
			t.Fatalf("agent %q: %+v, want %+v", agent, g, s)
		}
		for i := range s.runs {
			if g.runs[i] != s.runs[i] {
				t.Fatalf("agent %q: runs %v, want %v", agent, g.runs, s.runs)
			}
		}
	}
	// Every truncation, and every single-byte change that breaks an
	// invariant, is refused rather than misread.
	for n := range len(b) {
		if _, err := ParseCheckpoint(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	if _, err := ParseCheckpoint(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

// TestIDSetSettle checks settle against a map on random adds, gaps and
// settles: an id below a settled watermark counts as stored, the
// invariants hold, and a settle past every gap leaves no run.
func TestIDSetSettle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		var s IDSet
		ref := map[uint64]bool{}
		settled := uint64(0)
		next := uint64(0)
		for range 300 {
			switch rng.IntN(12) {
			case 0: // the agent's Hello: its watermark, at most what it sent
				w := uint64(rng.Int64N(int64(next) + 1))
				s.settle(w)
				settled = max(settled, w)
			case 1: // a gap: ids skipped
				next += uint64(1 + rng.IntN(20))
			default:
				s.add(next)
				ref[next] = true
				next++
			}
			if len(s.runs) > 0 && s.runs[0].first <= s.wm {
				t.Fatalf("round %d: first run %v at or below wm %d", round, s.runs[0], s.wm)
			}
		}
		for id := range next + 5 {
			if want := ref[id] || id < settled; s.has(id) != want {
				t.Fatalf("round %d: has(%d) = %v, want %v (settled below %d)", round, id, s.has(id), want, settled)
			}
		}
		for i, r := range s.runs {
			if r.first > r.last || r.first <= s.wm || (i > 0 && r.first <= s.runs[i-1].last+1) {
				t.Fatalf("round %d: runs %v break the invariant (wm %d)", round, s.runs, s.wm)
			}
		}
		s.settle(next)
		if len(s.runs) != 0 || s.wm != next {
			t.Fatalf("round %d: after settling at %d: wm %d, runs %v", round, next, s.wm, s.runs)
		}
	}
	// A run that reaches MaxUint64 stays a run.
	var s IDSet
	s.add(5)
	s.add(math.MaxUint64)
	s.settle(math.MaxUint64)
	if !s.has(math.MaxUint64) || !s.has(7) || s.wm != math.MaxUint64-1 || len(s.runs) != 1 {
		t.Fatalf("settle at MaxUint64: wm %d, runs %v", s.wm, s.runs)
	}
}
