package balance

import (
	"container/heap"
	"math/rand"
	"testing"
	"time"
)

// event is a request finishing at a fake time.
type event struct {
	at     time.Duration
	member int
	rtt    time.Duration
}
type events []event

func (e events) Len() int           { return len(e) }
func (e events) Less(i, j int) bool { return e[i].at < e[j].at }
func (e events) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)        { *e = append(*e, x.(event)) }
func (e *events) Pop() any          { x := (*e)[len(*e)-1]; *e = (*e)[:len(*e)-1]; return x }

// simulate runs a closed loop of inflight requests for n requests over
// servers that take service[i] each (requests run concurrently on a
// server, as the echo responder runs each on its own goroutine) and
// returns the count each server got.
func simulate(t *testing.T, p *Picker, service []time.Duration, inflight, n int, seed int64, rr bool) []int {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	got := make([]int, len(service))
	var q events
	now := time.Duration(0)
	send := func() {
		var i int
		var ok bool
		if rr {
			i, ok = p.PickRoundRobin(nil)
		} else {
			i, ok = p.Pick(now, r, nil)
		}
		if !ok {
			t.Fatal("no member")
		}
		p.Start(i)
		got[i]++
		heap.Push(&q, event{at: now + service[i], member: i, rtt: service[i]})
	}
	for range inflight {
		send()
	}
	for sent := inflight; sent < n; sent++ {
		ev := heap.Pop(&q).(event)
		now = ev.at
		p.Done(ev.member, now, ev.rtt)
		send()
	}
	return got
}

func TestPickAvoidsSlowMember(t *testing.T) {
	service := []time.Duration{200 * time.Microsecond, 20 * time.Millisecond, 200 * time.Microsecond}
	got := simulate(t, NewPicker(3, DefaultConfig), service, 16, 20000, 1, false)
	if share := float64(got[1]) / 20000; share >= 0.02 {
		t.Fatalf("slow member got %.1f%% (%v), want < 2%%", share*100, got)
	}
	if got[0] < 8000 || got[2] < 8000 {
		t.Fatalf("fast members unbalanced: %v", got)
	}
	rr := simulate(t, NewPicker(3, DefaultConfig), service, 16, 20000, 1, true)
	if rr[1] < 6600 {
		t.Fatalf("round-robin should give a third to each, got %v", rr)
	}
}

func TestPickEqualMembersShareEvenly(t *testing.T) {
	service := []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, time.Millisecond}
	got := simulate(t, NewPicker(4, DefaultConfig), service, 8, 40000, 7, false)
	for i, g := range got {
		if g < 9000 || g > 11000 {
			t.Fatalf("member %d got %d of 40000: %v", i, g, got)
		}
	}
}

func TestPickSkipsDownAndUnusable(t *testing.T) {
	p := NewPicker(3, DefaultConfig)
	r := rand.New(rand.NewSource(3))
	p.Failed(0, r)
	for range 100 {
		i, ok := p.Pick(0, r, func(i int) bool { return i != 2 })
		if !ok || i != 1 {
			t.Fatalf("Pick = %d %v, want 1", i, ok)
		}
	}
	if _, ok := p.Pick(0, r, func(i int) bool { return i == 0 }); ok {
		t.Fatal("picked a down member")
	}
	if _, ok := p.PickRoundRobin(func(i int) bool { return i == 0 }); ok {
		t.Fatal("round-robin picked a down member")
	}
	p.Up(0)
	if p.IsDown(0) {
		t.Fatal("Up left the member down")
	}
	seen := map[int]bool{}
	for range 3 {
		i, _ := p.PickRoundRobin(nil)
		seen[i] = true
	}
	if len(seen) != 3 {
		t.Fatalf("round-robin visited %v", seen)
	}
}

func TestPeakEWMA(t *testing.T) {
	cfg := DefaultConfig
	p := NewPicker(2, cfg)
	ms := time.Millisecond
	p.Start(0)
	p.Done(0, 0, ms)
	if c := p.Cost(0, 0); c != float64(ms) {
		t.Fatalf("first sample: cost %v", c)
	}
	p.Start(0)
	p.Done(0, 10*ms, 5*ms) // above: taken at once
	if c := p.Cost(0, 10*ms); c != float64(5*ms) {
		t.Fatalf("peak: cost %v, want 5ms", c)
	}
	p.Start(0)
	p.Done(0, 10*ms+cfg.Decay, ms) // below, one Decay later: weight 1/e on the old value
	want := 5*0.36787944117144233 + 1*(1-0.36787944117144233)
	if c := p.Cost(0, 10*ms+cfg.Decay) / float64(ms); c < want-1e-9 || c > want+1e-9 {
		t.Fatalf("decay: cost %vms, want %vms", c, want)
	}
	// Outstanding multiplies; an idle member's estimate fades.
	base := p.Cost(0, 10*ms+cfg.Decay)
	p.Start(0)
	p.Start(0)
	if c := p.Cost(0, 10*ms+cfg.Decay); c != 3*base {
		t.Fatalf("outstanding 2: cost %v, want %v", c, 3*base)
	}
	p.Done(0, 10*ms+cfg.Decay, 0)
	p.Done(0, 10*ms+cfg.Decay, 0) // no samples
	if c := p.Cost(0, 10*ms+3*cfg.Decay); c >= base/5 {
		t.Fatalf("idle two Decays: cost %v, want < %v", c, base/5)
	}
	// An unsampled member is assumed as good as the best sampled one.
	if p.Cost(1, 10*ms+cfg.Decay) != base {
		t.Fatalf("fresh member cost %v, want %v", p.Cost(1, 10*ms+cfg.Decay), base)
	}
	if q := NewPicker(1, cfg); q.Cost(0, 0) != float64(cfg.InitialLatency) {
		t.Fatal("no samples anywhere: want InitialLatency")
	}
}

func TestBackoffSchedule(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	base, maxD := 50*time.Millisecond, 5*time.Second
	for n := 1; n <= 80; n++ {
		d := min(maxD, base<<min(n-1, 20))
		for range 50 {
			got := Backoff(n, base, maxD, r)
			if got < d/2 || got > d {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, got, d/2, d)
			}
		}
	}
	// Jitter: not all the same.
	seen := map[time.Duration]bool{}
	for range 20 {
		seen[Backoff(3, base, maxD, r)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("jitter too small: %v", seen)
	}
	p := NewPicker(1, Config{BackoffBase: base, BackoffMax: maxD})
	if d := p.Failed(0, r); d > base {
		t.Fatalf("first failure waits %v", d)
	}
	if d := p.Failed(0, r); d < base || d > 2*base {
		t.Fatalf("second failure waits %v", d)
	}
	p.Up(0)
	if d := p.Failed(0, r); d > base {
		t.Fatalf("Up did not reset the schedule: %v", d)
	}
}

func TestRetryBudget(t *testing.T) {
	b := NewBudget(0.1, 2, 50)
	// No requests: only the floor, 2 at once, then refilled by time.
	if got := [3]bool{b.Withdraw(0), b.Withdraw(0), b.Withdraw(0)}; got != [3]bool{true, true, false} {
		t.Fatalf("floor at start: withdrawals %v, want exactly 2", got)
	}
	if got := [2]bool{b.Withdraw(500 * time.Millisecond), b.Withdraw(500 * time.Millisecond)}; got != [2]bool{true, false} {
		t.Fatalf("half a second refills one floor token: withdrawals %v", got)
	}
	// 100 requests buy 10 retries (plus the floor, empty now).
	for range 100 {
		b.Deposit()
	}
	n := 0
	for b.Withdraw(500 * time.Millisecond) {
		n++
		if n > 1000 {
			t.Fatal("unbounded")
		}
	}
	if n != 10 {
		t.Fatalf("100 requests bought %d retries, want 10", n)
	}
	// Banked tokens are capped.
	for range 10000 {
		b.Deposit()
	}
	n = 0
	for b.Withdraw(500 * time.Millisecond) {
		n++
	}
	if n != 50 {
		t.Fatalf("cap: %d retries, want 50", n)
	}
}
