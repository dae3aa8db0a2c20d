package spool

import (
	"log/slog"
	"path/filepath"
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
