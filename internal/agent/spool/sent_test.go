package spool

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
)

// reopen closes sp and opens its directory again.
func reopen(t *testing.T, sp *Spool, dir string) *Spool {
	t.Helper()
	sp.Close()
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestSentBoundCoversEverySentID: a new spool has sent nothing (bound 0,
// known); ReserveSent makes the durable bound cover each id it lets out,
// a step ahead, writing only when an id reaches it, and the bound
// survives a restart, whichever of its two slots holds it.
func TestSentBoundCoversEverySentID(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, known := sp.SentBelow(); b != 0 || !known {
		t.Fatalf("new spool: bound %d known %v, want 0 known", b, known)
	}
	for range 5 {
		if _, err := sp.Log().Append([][]byte{[]byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.ReserveSent(0); err != nil {
		t.Fatal(err)
	}
	first, _ := sp.SentBelow()
	if first != 5+defaults.SpoolIDReservation {
		t.Fatalf("bound %d after sending id 0 with 5 ids given, want %d (every id the log gave, and a step)", first, 5+defaults.SpoolIDReservation)
	}
	for id := uint64(1); id < first; id += 997 {
		if err := sp.ReserveSent(id); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := sp.SentBelow(); b != first {
		t.Fatalf("bound moved to %d for ids below it", b)
	}
	sp = reopen(t, sp, dir)
	if b, known := sp.SentBelow(); b != first || !known {
		t.Fatalf("after a restart: bound %d known %v, want %d", b, known, first)
	}
	// Two more steps: the second slot, then the first again.
	for _, id := range []uint64{first, first + defaults.SpoolIDReservation + 1} {
		if err := sp.ReserveSent(id); err != nil {
			t.Fatal(err)
		}
		want, _ := sp.SentBelow()
		if want <= id {
			t.Fatalf("bound %d does not cover id %d", want, id)
		}
		sp = reopen(t, sp, dir)
		if b, _ := sp.SentBelow(); b != want {
			t.Fatalf("after a restart: bound %d, want %d", b, want)
		}
	}
	sp.Close()
}

// TestSentBoundDamaged: a torn or damaged newer slot leaves the older
// bound (lower, and never below an id it let out before the newer one was
// written, since each is written before its ids go); both damaged, or no
// file on a spool that has sent, the bound is unknown (the Hello carries
// none, so no sink refuses on it), and the next send writes one above
// every id the log gave.
func TestSentBoundDamaged(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sp.Log().Append([][]byte{[]byte("x")})
	if err := sp.ReserveSent(0); err != nil {
		t.Fatal(err)
	}
	older, _ := sp.SentBelow()
	if err := sp.ReserveSent(older); err != nil {
		t.Fatal(err)
	}
	newer, _ := sp.SentBelow()
	slot := sp.sentSlot
	sp.Close()
	path := filepath.Join(dir, sentFile)
	b, _ := os.ReadFile(path)
	b[slot*sentSlotLen+3] ^= 0x40
	os.WriteFile(path, b, 0o644)
	sp, err = Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, known := sp.SentBelow(); got != older || !known {
		t.Fatalf("newer slot (%d) damaged: bound %d known %v, want the older %d", newer, got, known, older)
	}
	sp.Close()
	for _, damage := range []func(){
		func() { os.WriteFile(path, make([]byte, 2*sentSlotLen), 0o644) },
		func() { os.Remove(path) },
	} {
		damage()
		sp, err = Open(dir, 0, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, known := sp.SentBelow(); known {
			t.Fatal("bound known with no valid slot on a spool that has sent")
		}
		if err := sp.ReserveSent(0); err != nil {
			t.Fatal(err)
		}
		if got, known := sp.SentBelow(); !known || got < sp.Log().NextOffset()+defaults.SpoolIDReservation {
			t.Fatalf("bound %d known %v after a send, want at least every id the log gave and a step", got, known)
		}
		sp.Close()
	}
	// Something else at its path (an empty directory): unreadable, and it
	// cannot be written. It is removed and the id goes, the bound unknown
	// (no Hello carries one), never wedging delivery; a step later the
	// bound is written.
	os.Remove(path)
	os.Mkdir(path, 0o755)
	if sp, err = Open(dir, 0, "", nil); err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if len(sp.Warnings()) == 0 {
		t.Error("no warning for an unreadable bound")
	}
	if err := sp.ReserveSent(0); err != nil {
		t.Fatalf("ReserveSent with a directory in the way: %v", err)
	}
	if _, known := sp.SentBelow(); known {
		t.Fatal("bound known although it could not be written")
	}
	if err := sp.ReserveSent(sp.Log().NextOffset() + defaults.SpoolIDReservation); err != nil {
		t.Fatal(err)
	}
	if _, known := sp.SentBelow(); !known {
		t.Fatal("bound not written a step later, with the path free")
	}
}

// TestSentBoundFullDisk: on a disk with no room, sending never waits for
// the bound: a new file that cannot be made leaves it unknown and the id
// goes; once there is room, a later step writes it. A bound that cannot be
// updated is removed, not left below ids sent.
func TestSentBoundFullDisk(t *testing.T) {
	mnt := testtmpfs.Mount(t, "256k")
	dir := filepath.Join(mnt, "spool")
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sp.Log().Append([][]byte{[]byte("x")})
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			if !IsNoSpace(err) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	if err := sp.ReserveSent(0); err != nil {
		t.Fatalf("ReserveSent on a full disk: %v; want the id let out with the bound unknown", err)
	}
	if _, known := sp.SentBelow(); known {
		t.Fatal("bound known although its file could not be written")
	}
	if _, err := os.Stat(filepath.Join(dir, sentFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a bound file left behind: %v", err)
	}
	os.Remove(filler)
	if err := sp.ReserveSent(1); err != nil { // below the retry step: not tried
		t.Fatal(err)
	}
	if _, known := sp.SentBelow(); known {
		t.Fatal("file tried again before a step passed")
	}
	if err := sp.ReserveSent(defaults.SpoolIDReservation + 1); err != nil {
		t.Fatal(err)
	}
	if b, known := sp.SentBelow(); !known || b <= defaults.SpoolIDReservation+1 {
		t.Fatalf("with room again: bound %d known %v", b, known)
	}
}

// TestChangingIDResetsSentBound: a spool that takes a new id
// (OpenChangingID) has sent nothing under it.
func TestChangingIDResetsSentBound(t *testing.T) {
	dir := t.TempDir()
	usedSpool(t, dir, 3)
	sp, err := Open(dir, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.ReserveSent(2); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	if _, err := Open(dir, 0, "other", nil); err == nil {
		t.Fatal("a used spool took another id without OpenChangingID")
	}
	sp, err = OpenChangingID(dir, 0, "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if sp.ID() != "other" {
		t.Fatalf("id %q", sp.ID())
	}
	if b, known := sp.SentBelow(); b != 0 || !known {
		t.Fatalf("bound %d known %v under the new id, want 0 known", b, known)
	}
}
