package logutil

import (
	"fmt"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	var e Every
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		after time.Duration
		due   bool
	}{{0, true}, {time.Second, false}, {59 * time.Second, false}, {60 * time.Second, true}, {61 * time.Second, false}, {121 * time.Second, true}} {
		if got := e.Due(t0.Add(c.after), time.Minute); got != c.due {
			t.Fatalf("at +%v: due %v, want %v", c.after, got, c.due)
		}
	}
}

// TestEveryKeyBounded: a line per key once a period, and never more than
// Max keys remembered, whatever the number of keys: addresses warned about
// within the period fill it, a new one is quiet until one ages out. Before,
// the sink's per-address warning map (internal/sink/limits.go) kept every
// address it ever warned about.
func TestEveryKeyBounded(t *testing.T) {
	e := EveryKey{Max: 3}
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if !e.Due(fmt.Sprint("k", i), t0, time.Minute) {
			t.Fatalf("k%d: first line not due", i)
		}
	}
	if e.Due("k0", t0.Add(time.Second), time.Minute) {
		t.Fatal("k0 due again within the period")
	}
	if e.Due("k3", t0.Add(time.Second), time.Minute) {
		t.Fatal("a fourth key due while three were logged within the period")
	}
	for i := range 10_000 {
		e.Due(fmt.Sprint("many", i), t0.Add(time.Duration(i)*time.Millisecond), time.Minute)
		if e.Keys() > 3 {
			t.Fatalf("%d keys remembered, max 3", e.Keys())
		}
	}
	if !e.Due("k3", t0.Add(2*time.Minute), time.Minute) {
		t.Fatal("a new key not due once the others aged out")
	}
	var z EveryKey
	for i := range DefaultEveryKeys + 10 {
		z.Due(fmt.Sprint(i), t0, time.Minute)
	}
	if z.Keys() != DefaultEveryKeys {
		t.Fatalf("zero value: %d keys, want %d", z.Keys(), DefaultEveryKeys)
	}
}
