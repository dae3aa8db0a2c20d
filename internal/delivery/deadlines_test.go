package delivery

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The timer queue pops in (deadline, id) order whatever mix of in-order
// (FIFO) and out-of-order (heap) deadlines it is given, with pops
// interleaved.
func TestTimerQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var q timerQueue
		var model []timerEntry
		at := int64(0)
		for i := range 500 {
			switch r := rng.IntN(10); {
			case r < 6: // mostly later deadlines, sometimes earlier ones
				at += rng.Int64N(10) - 2
				e := timerEntry{at: at, id: uint64(i), attempt: 1}
				q.push(e)
				model = append(model, e)
			case r < 9 && len(model) > 0:
				slices.SortFunc(model, func(a, b timerEntry) int {
					if a.before(b) {
						return -1
					}
					if b.before(a) {
						return 1
					}
					return 0
				})
				if got := q.min(); got != model[0] {
					t.Fatalf("round %d: min %+v, want %+v", round, got, model[0])
				}
				if got := q.pop(); got != model[0] {
					t.Fatalf("round %d: pop %+v, want %+v", round, got, model[0])
				}
				model = model[1:]
			case r == 9 && rng.IntN(20) == 0:
				q.reset()
				model = model[:0]
			}
			if q.len() != len(model) {
				t.Fatalf("round %d: len %d, want %d", round, q.len(), len(model))
			}
		}
	}
}
