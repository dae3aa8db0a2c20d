package spool

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/seglog"
)

// TestSetAsideOnFullDisk: on a disk with no room for the copy, SetAside
// fails with the disk's error (ENOSPC) and writes no letter, so the
// caller keeps the message parked; once there is room it succeeds, and
// the letter holds the message as spooled. The spool's own log is not
// touched either way.
func TestSetAsideOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	disk := testfs.New(1 << 20)
	sp, err := Open(dir, 0, "agent-full", slog.New(slog.DiscardHandler), seglog.WithFS(disk), seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rec := Append(nil, Record{Kind: codec.Plain, Records: 1, Body: make([]byte, 4<<10)})
	if _, err := sp.Log().Append([][]byte{rec}); err != nil {
		t.Fatal(err)
	}
	disk.SetLimit(disk.Used()) // full
	if _, err := sp.SetAside(0, "ERROR_CODE_OVERSIZE", "too large", time.Now()); !IsNoSpace(err) {
		t.Fatalf("SetAside on a full disk: %v, want ENOSPC", err)
	}
	var n int
	if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(deadletter.Letter) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("after the failed copy: %d letters, %v; want none", n, err)
	}
	disk.SetLimit(1 << 20)
	if _, err := sp.SetAside(0, "ERROR_CODE_OVERSIZE", "too large", time.Now()); err != nil {
		t.Fatalf("SetAside with room: %v", err)
	}
	var got []deadletter.Letter
	if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		l.Record = append([]byte(nil), l.Record...)
		got = append(got, l)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != 0 || string(got[0].Record) != string(rec) {
		t.Fatalf("letters %d, want the one message as spooled", len(got))
	}
	if next := sp.Log().NextOffset(); next != 1 {
		t.Errorf("the spool's log moved to %d", next)
	}
}

// TestSetAsideLargeMessage: a message larger than SetAside's read budget
// (64 KiB) is copied whole.
func TestSetAsideLargeMessage(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir, 0, "agent-large", slog.New(slog.DiscardHandler), seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	body := make([]byte, 3<<20)
	for i := range body {
		body[i] = byte(i * 7)
	}
	small := Append(nil, Record{Kind: codec.Plain, Records: 1, Body: []byte("before")})
	large := Append(nil, Record{Kind: codec.Plain, Records: 1, Body: body})
	if _, err := sp.Log().Append([][]byte{small, large}); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.SetAside(1, "ERROR_CODE_OVERSIZE", "3 MiB", time.Now()); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		got = append([]byte(nil), l.Record...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(large) {
		t.Fatalf("letter of %d bytes, want the %d-byte message as spooled", len(got), len(large))
	}
}

// TestSetAsideAfterDamagedDeadLetters: a dead-letter log damaged before
// its end (a flipped byte in its first letter), which seglog will not
// open, does not stop the agent setting messages aside: the log is moved
// aside whole (dead-letter.damaged-*) and a new one holds the next
// letter. Refusing would let the parked messages fill the spool again.
func TestSetAsideAfterDamagedDeadLetters(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	sp, err := Open(dir, 0, "agent-damaged", log, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]byte{
		Append(nil, Record{Kind: codec.Plain, Records: 1, Body: []byte("first-refused")}),
		Append(nil, Record{Kind: codec.Plain, Records: 1, Body: []byte("second-refused")}),
		Append(nil, Record{Kind: codec.Plain, Records: 1, Body: []byte("third-refused")}),
	}
	if _, err := sp.Log().Append(recs); err != nil {
		t.Fatal(err)
	}
	for id := range uint64(2) {
		if _, err := sp.SetAside(id, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	sp.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, deadletter.Dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("dead-letter segments %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("first-refused"))
	if i < 0 {
		t.Fatal("the first letter is not in the segment")
	}
	b[i] ^= 0xff
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Reading it (dead-letter list) gives the intact letter and names the
	// damage.
	var read []uint64
	err = deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		read = append(read, l.ID)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "damaged") || len(read) != 1 || read[0] != 1 {
		t.Errorf("reading the damaged log: letters %v, %v; want message 1 and an error naming the damage", read, err)
	}

	sp, err = Open(dir, 0, "agent-damaged", log, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := sp.SetAside(2, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil {
		t.Fatalf("SetAside with a damaged dead-letter log: %v", err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, deadletter.Dir+".damaged-*"))
	if len(aside) != 1 {
		t.Fatalf("damaged logs moved aside: %v, want 1", aside)
	}
	if moved, _ := filepath.Glob(filepath.Join(aside[0], "*.seg")); len(moved) != 1 {
		t.Errorf("the damaged log's segments were not kept: %v", moved)
	}
	var ids []uint64
	if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		ids = append(ids, l.ID)
		return nil
	}); err != nil || len(ids) != 1 || ids[0] != 2 {
		t.Errorf("the new dead-letter log holds %v (%v), want message 2", ids, err)
	}
	// Listed now, message 1's letter comes from the damaged log.
	var early bytes.Buffer
	if letters, _, err := PrintDeadLetters(&early, io.Discard, dir, false, nil); err != nil || letters != 2 || !strings.Contains(early.String(), "message 1\t") {
		t.Errorf("list with message 1 only in the damaged log: %d letters, %v; want 2, message 1 among them:\n%s", letters, err, early.String())
	}
	// Message 1's only letter is in the log moved aside: set aside again
	// (a crash before the watermark passed it), it is copied into the new
	// one, which `list` reads.
	if n, err := sp.SetAside(1, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil || n == 0 {
		t.Fatalf("SetAside of a message whose letter was moved aside: %d bytes, %v; want a copy", n, err)
	}

	// `dead-letter list` reads the damaged log's intact letters with the
	// new log's, each message once (message 0's letter is the damage),
	// and names the damaged log; `clear` removes both (before: list and
	// clear saw only the new log, and the damaged one stayed in the spool
	// for good, unmentioned).
	var out, errw bytes.Buffer
	letters, unreadable, err := PrintDeadLetters(&out, &errw, dir, false, nil)
	if err != nil || unreadable != 0 || letters != 2 || strings.Contains(out.String(), "message 0\t") {
		t.Fatalf("list: %d letters, %d unreadable, %v; want 2 (messages 1 and 2)\n%s%s", letters, unreadable, err, out.String(), errw.String())
	}
	for _, id := range []string{"message 1\t", "message 2\t"} {
		if strings.Count(out.String(), id) != 1 {
			t.Errorf("list printed %q %d times, want once:\n%s", id, strings.Count(out.String(), id), out.String())
		}
	}
	if !strings.Contains(errw.String(), aside[0]) {
		t.Errorf("list does not name the damaged log %s: %q", aside[0], errw.String())
	}
	sp.Close()
	// An agent that starts on the spool says so (the log moved aside holds
	// letters nobody may have listed).
	sp, err = Open(dir, 0, "agent-damaged", log, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(sp.Warnings(), "\n"); !strings.Contains(w, "1 damaged dead-letter log moved aside earlier ("+aside[0]+")") {
		t.Errorf("start-up warnings do not name the damaged log %s:\n%s", aside[0], w)
	}
	sp.Close()
	n, damaged, err := ClearDeadLetters(dir)
	if err != nil || n != 2 || damaged != 1 {
		t.Errorf("clear: %d letters, %d damaged logs, %v; want 2 and 1", n, damaged, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, deadletter.Dir+"*")); len(left) != 0 {
		t.Errorf("left after clear: %v", left)
	}
	if got, want := ClearedLine(n, damaged), "removed 2 dead letters (with 1 damaged log moved aside)"; got != want {
		t.Errorf("clear says %q, want %q", got, want)
	}
}

// TestSetAsideOnceAfterCrash: a crash after a message's letter is
// durable and before the watermark moved past it sets the message aside
// again after the restart; the log, which already holds it, does not
// take a second copy (before: two letters, which `list` printed once and
// the log kept until `clear`).
func TestSetAsideOnceAfterCrash(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	sp, err := Open(dir, 0, "agent-crash", log, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	rec := Append(nil, Record{Kind: codec.Plain, Records: 1, Body: []byte("refused")})
	if _, err := sp.Log().Append([][]byte{rec, rec}); err != nil {
		t.Fatal(err)
	}
	if n, err := sp.SetAside(0, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil || n == 0 {
		t.Fatalf("SetAside: %d bytes, %v", n, err)
	}
	if n, err := sp.SetAside(0, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil || n != 0 {
		t.Fatalf("INVARIANT duplicated: SetAside of a message already set aside: %d bytes, %v; want 0 and no error", n, err)
	}
	sp.Close() // the watermark never moved: as after a crash
	sp, err = Open(dir, 0, "agent-crash", log, seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for _, id := range []uint64{0, 1} {
		if _, err := sp.SetAside(id, "ERROR_CODE_BAD_PAYLOAD", "test", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	var ids []uint64
	if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		ids = append(ids, l.ID)
		return nil
	}); err != nil || len(ids) != 2 || ids[0] != 0 || ids[1] != 1 {
		t.Errorf("INVARIANT duplicated: letters %v (%v), want messages 0 and 1 once each", ids, err)
	}
	if n := sp.DeadLetters(); n != 2 {
		t.Errorf("DeadLetters %d, want 2", n)
	}
}

// TestSetAsideManyFewSyncs: a thousand refused messages are set aside
// with a few fsyncs of the dead-letter log (one per setAsideBatchBytes
// of letters, and one per segment sealed), not one each: the driver's loop, which holds its lock
// meanwhile, waits for those few (before: 1,000 fsyncs, seconds on a
// disk that syncs in milliseconds). Every message is in the log once,
// in order, and one already held is counted done and not copied again.
func TestSetAsideManyFewSyncs(t *testing.T) {
	dir := t.TempDir()
	var syncs int
	sp, err := Open(dir, 0, "agent-many", slog.New(slog.DiscardHandler), seglog.WithSync(seglog.SyncNone()),
		seglog.WithSyncObserver(func(time.Duration) { syncs++ }))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	const n = 1000
	body := bytes.Repeat([]byte("r"), 10<<10) // 10 MB of letters in all: three batches
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = Append(nil, Record{Kind: codec.Plain, Records: 1, Body: body})
	}
	if _, err := sp.Log().Append(recs); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.SetAside(7, "ERROR_CODE_BAD_PAYLOAD", "first", time.Now()); err != nil {
		t.Fatal(err)
	}
	syncs = 0
	rs := make([]Refused, n)
	for i := range rs {
		rs[i] = Refused{ID: uint64(i), Code: "ERROR_CODE_BAD_PAYLOAD", Detail: "test"}
	}
	res, err := sp.SetAsideMany(rs, time.Now())
	if err != nil || res.Done != n || res.Held != 1 {
		t.Fatalf("SetAsideMany: %d of %d done, %d held, %v; want all done and message 7 held", res.Done, n, res.Held, err)
	}
	if res.Copied < (n-1)*len(body) || res.Copied > n*(len(body)+1024) {
		t.Errorf("copied %d bytes, want about %d", res.Copied, (n-1)*len(body))
	}
	// One per 4 MiB batch, and one per dead-letter segment sealed (4 MiB):
	// 10 MB of letters, three of each.
	if syncs > 6 {
		t.Errorf("%d fsyncs for %d letters of 10 KiB, want at most 6 (one per 4 MiB batch, and one per segment sealed)", syncs, n)
	}
	var ids []uint64
	if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		ids = append(ids, l.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("%d letters, want %d (each message once)", len(ids), n)
	}
	seen := map[uint64]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("INVARIANT duplicated: message %d has two letters", id)
		}
		seen[id] = true
	}
}

// TestSetAsideManyStopsAtMissing: a message the spool no longer holds
// stops SetAsideMany there; those before it are durable and counted
// done, so the caller settles exactly them.
func TestSetAsideManyStopsAtMissing(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir, 0, "agent-missing", slog.New(slog.DiscardHandler), seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	rec := Append(nil, Record{Kind: codec.Plain, Records: 1, Body: []byte("refused")})
	if _, err := sp.Log().Append([][]byte{rec, rec, rec}); err != nil {
		t.Fatal(err)
	}
	rs := []Refused{{ID: 0}, {ID: 2}, {ID: 9}, {ID: 1}}
	res, err := sp.SetAsideMany(rs, time.Now())
	if err == nil || !strings.Contains(err.Error(), "message 9") || res.Done != 2 || res.Copied == 0 {
		t.Fatalf("SetAsideMany past a missing message: %d done, %d bytes, %v; want 2 done and an error naming message 9", res.Done, res.Copied, err)
	}
	if sp.DeadLetters() != 2 {
		t.Errorf("the log holds %d messages, want 2", sp.DeadLetters())
	}
}

// TestSetAsideManyDiskFullMidway: the disk fills after the first of a
// batch's appends: the messages of that append are durable and counted
// done, the rest are not (nothing of them in the log, nor taken as held),
// the error is the disk's, and with room again they are copied once.
func TestSetAsideManyDiskFullMidway(t *testing.T) {
	dir := t.TempDir()
	disk := testfs.New(64 << 20)
	sp, err := Open(dir, 0, "agent-midway", slog.New(slog.DiscardHandler), seglog.WithFS(disk), seglog.WithSync(seglog.SyncNone()))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	const n = 1000
	rec := Append(nil, Record{Kind: codec.Plain, Records: 1, Body: bytes.Repeat([]byte("m"), 10<<10)})
	recs := make([][]byte, n)
	for i := range recs {
		recs[i] = rec
	}
	if _, err := sp.Log().Append(recs); err != nil {
		t.Fatal(err)
	}
	disk.SetLimit(disk.Used() + 6<<20) // room for one 4 MiB append, not two
	rs := make([]Refused, n)
	for i := range rs {
		rs[i] = Refused{ID: uint64(i), Code: "ERROR_CODE_BAD_PAYLOAD"}
	}
	res, err := sp.SetAsideMany(rs, time.Now())
	if !IsNoSpace(err) || res.Done == 0 || res.Done == n {
		t.Fatalf("SetAsideMany on a disk that fills: %d of %d done, %v; want some done and ENOSPC", res.Done, n, err)
	}
	count := func() map[uint64]int {
		got := map[uint64]int{}
		if err := deadletter.Read(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error { got[l.ID]++; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := count(); len(got) != res.Done || sp.DeadLetters() != res.Done {
		t.Fatalf("the log holds %d messages, the spool counts %d, SetAsideMany said %d", len(got), sp.DeadLetters(), res.Done)
	}
	disk.SetLimit(64 << 20)
	again, err := sp.SetAsideMany(rs, time.Now())
	if err != nil || again.Done != n || again.Held != res.Done {
		t.Fatalf("with room: %d done, %d held, %v; want %d and %d", again.Done, again.Held, err, n, res.Done)
	}
	for id, c := range count() {
		if c != 1 {
			t.Fatalf("INVARIANT duplicated: message %d has %d letters", id, c)
		}
	}
	if got := count(); len(got) != n {
		t.Fatalf("%d messages in the log, want %d", len(got), n)
	}
}
