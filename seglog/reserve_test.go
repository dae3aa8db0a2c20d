package seglog

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// powerCut opens dir with a reservation of step offsets under policy,
// appends n equal records one at a time, then leaves the log as a machine
// crash would: the reservation file as written, the segment cut to its
// first keep records (the unsynced tail lost). It returns the options to
// reopen with.
func powerCut(t *testing.T, dir string, policy SyncPolicy, step uint64, n, keep int) []Option {
	t.Helper()
	opts := []Option{WithSync(policy), WithOffsetReservation(step), WithLogger(slog.New(slog.DiscardHandler))}
	l, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := l.Append([][]byte{[]byte(fmt.Sprintf("record %03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	reservation, err := os.ReadFile(filepath.Join(dir, ReservationFile))
	if err != nil {
		t.Fatalf("no reservation after %d appends under %v: %v", n, policy, err)
	}
	l.Close() // may lower the reservation: put back below
	if err := os.WriteFile(filepath.Join(dir, ReservationFile), reservation, 0o644); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segmentName(0))
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(seg, fi.Size()/int64(n)*int64(keep)); err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestReservationSurvivesLostTail: after a machine crash loses records
// whose offsets were handed out, the log goes on after every offset it
// could have handed out, and readers see the lost ones as a gap.
func TestReservationSurvivesLostTail(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncInterval(time.Hour), SyncNone()} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			opts := powerCut(t, dir, policy, 16, 10, 3)
			l, err := Open(dir, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			// The first append reserved [0, 1+16).
			if next := l.NextOffset(); next != 17 {
				t.Fatalf("INVARIANT offset-reused: after losing records 3..9 the next offset is %d, want 17 (the reservation)", next)
			}
			if from, to := l.SkippedAtOpen(); from != 3 || to != 17 {
				t.Fatalf("SkippedAtOpen = [%d, %d), want [3, 17)", from, to)
			}
			if off, err := l.Append([][]byte{[]byte("after")}); err != nil || off != 17 {
				t.Fatalf("append after the skip: %d, %v", off, err)
			}
			offs, _ := readAll(t, l, 0, 1<<20)
			if want := []uint64{0, 1, 2, 17}; !slices.Equal(offs, want) {
				t.Fatalf("offsets read back %v, want %v", offs, want)
			}
			// The skip is durable: a reopen neither skips again nor
			// loses the gap.
			l.Close()
			l2, err := Open(dir, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if next := l2.NextOffset(); next < 18 {
				t.Fatalf("after a clean reopen the next offset is %d, want at least 18", next)
			}
		})
	}
}

// TestCleanCloseSkipsNothing: a clean Close syncs and lowers the
// reservation, so the next Open goes on where the log ends. Under
// SyncNone Close did not sync, and every clean restart skipped a step and
// warned of an unclean stop (found by hand, 2026-11-29).
func TestCleanCloseSkipsNothing(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncInterval(time.Hour), SyncNone()} {
		t.Run(policy.String(), func(t *testing.T) { cleanCloseSkipsNothing(t, policy) })
	}
}

func cleanCloseSkipsNothing(t *testing.T, policy SyncPolicy) {
	dir := t.TempDir()
	opts := []Option{WithSync(policy), WithOffsetReservation(16), WithLogger(slog.New(slog.DiscardHandler))}
	for round := range 3 {
		l, err := Open(dir, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if from, to := l.SkippedAtOpen(); from != to {
			t.Fatalf("round %d: a clean restart skipped [%d, %d)", round, from, to)
		}
		if next := l.NextOffset(); next != uint64(5*round) {
			t.Fatalf("round %d: next offset %d, want %d", round, next, 5*round)
		}
		for range 5 {
			if _, err := l.Append([][]byte{[]byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReservationOncePerStep: the reservation file is written when an
// offset reaches it, not per append.
func TestReservationOncePerStep(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, WithSync(SyncNone()), WithOffsetReservation(100), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	writes := 0
	last := uint64(0)
	for i := range 1000 {
		if _, err := l.Append([][]byte{[]byte("x")}); err != nil {
			t.Fatal(err)
		}
		r, err := l.readReservation()
		if err != nil {
			t.Fatal(err)
		}
		if r <= uint64(i) {
			t.Fatalf("offset %d published with the reservation at %d", i, r)
		}
		if r != last {
			writes++
			last = r
		}
	}
	if writes > 10 {
		t.Fatalf("%d reservation writes for 1000 appends at a step of 100", writes)
	}
}

// TestDamagedReservation: an unreadable reservation file is outside
// damage; Open says so and skips two steps instead of refusing to open.
func TestDamagedReservation(t *testing.T) {
	dir := t.TempDir()
	opts := powerCut(t, dir, SyncNone(), 16, 10, 3)
	if err := os.WriteFile(filepath.Join(dir, ReservationFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if next := l.NextOffset(); next != 3+32 {
		t.Fatalf("next offset %d, want 35 (two steps past the log's end)", next)
	}
}

// TestReservationHonouredUnderSyncAlways: a log reopened under SyncAlways
// after a run under SyncInterval still skips what that run reserved, and
// reserves nothing itself.
func TestReservationHonouredUnderSyncAlways(t *testing.T) {
	dir := t.TempDir()
	powerCut(t, dir, SyncInterval(time.Hour), 16, 10, 3)
	l, err := Open(dir, WithOffsetReservation(16), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if next := l.NextOffset(); next != 17 {
		t.Fatalf("next offset %d, want 17", next)
	}
	for range 40 {
		if _, err := l.Append([][]byte{[]byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if r, _ := l.readReservation(); r != 17 {
		t.Fatalf("SyncAlways rewrote the reservation to %d", r)
	}
}
