package seglogstore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/storedmsg"
)

// TestAppendReopen: what Append stores reads back as stored messages with
// the payload as given, and a reopen rebuilds the dedup index from the
// store (no checkpoint was written).
func TestAppendReopen(t *testing.T) {
	dir := t.TempDir()
	o := Options{DataDir: dir, MaxMessageBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, d, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{"first payload", "zstd bytes, stored as received"}
	msgs := []*store.Message{
		{Agent: "edge-1", AgentB: []byte("edge-1"), ID: 7, Codec: codec.Plain, Records: 1, Body: []byte(bodies[0])},
		{Agent: "edge-1", AgentB: []byte("edge-1"), ID: 8, Codec: codec.Zstd, Records: 3, Body: []byte(bodies[1])},
		{Agent: "", AgentB: nil, ID: 9, Codec: codec.Plain, Records: 1, Body: []byte("no agent")},
	}
	n, err := s.Append(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[2].DropErr == nil || msgs[0].DropErr != nil || msgs[1].DropErr != nil {
		t.Fatalf("drop errors %v %v %v: want only the message without an agent dropped", msgs[0].DropErr, msgs[1].DropErr, msgs[2].DropErr)
	}
	if n == 0 || d.Next != 2 {
		t.Fatalf("wrote %d bytes, index next %d", n, d.Next)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, d, err = Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !d.Has("edge-1", 7) || !d.Has("edge-1", 8) || d.Has("edge-1", 9) {
		t.Fatal("dedup index not rebuilt from the store")
	}
	it := s.Log().NewIterator(0, 1<<20)
	for i := 0; it.Next(); i++ {
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Body) != bodies[i] || m.MessageID != msgs[i].ID || m.Codec != msgs[i].Codec || m.RecordCount != msgs[i].Records {
			t.Fatalf("record %d: %+v", i, m)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestReader: the store reads back through store.Reader, group positions
// survive a reopen, and an iterator of a closed store says ErrClosed.
func TestReader(t *testing.T) {
	dir := t.TempDir()
	o := Options{DataDir: dir, MaxMessageBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var r store.Reader = s
	if _, err := s.Append([]*store.Message{{Agent: "a", AgentB: []byte("a"), ID: 1, Codec: codec.Plain, Records: 1, Body: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if r.FirstOffset() != 0 || r.NextOffset() != 1 {
		t.Fatalf("bounds [%d, %d]", r.FirstOffset(), r.NextOffset())
	}
	select {
	case <-r.Wait(0):
	default:
		t.Fatal("Wait(0) open with offset 0 stored")
	}
	it := r.NewIterator(0, 4096)
	if !it.Next() || it.Offset() != 0 || it.Next() || it.Err() != nil {
		t.Fatalf("iterator: offset %d, err %v", it.Offset(), it.Err())
	}
	if _, ok, err := r.Committed("g"); ok || err != nil {
		t.Fatalf("a group never committed: ok %v, err %v", ok, err)
	}
	if err := r.Commit("g", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	it = r.NewIterator(0, 4096)
	if it.Next() || !errors.Is(it.Err(), store.ErrClosed) {
		t.Fatalf("iterator of a closed store: %v, want ErrClosed", it.Err())
	}
	s, _, err = Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pos, ok, err := s.Committed("g"); !ok || err != nil || pos != 1 {
		t.Fatalf("group g after reopen: %d %v %v, want 1", pos, ok, err)
	}
}

// TestDamagedStoreNamesTheRepair: a store damaged before its last record
// is refused at open with the segment, the byte and the one command that
// goes on from it, as the agent says of its spool. Before, the sink said
// only "open store: ... corrupt record" (found by hand).
func TestDamagedStoreNamesTheRepair(t *testing.T) {
	dir := t.TempDir()
	o := Options{DataDir: dir, MaxMessageBytes: 1 << 20, Logger: slog.New(slog.DiscardHandler)}
	s, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := s.Append([]*store.Message{{Agent: "edge-1", AgentB: []byte("edge-1"), ID: uint64(i), Codec: codec.Plain, Records: 1, Body: []byte("a record of some length")}}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	seg := filepath.Join(dir, "store", fmt.Sprintf("%020d.seg", 0))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, 60)
	b[0] ^= 0x5A
	f.WriteAt(b, 60) // inside an early record
	f.Close()
	_, _, err = Open(o)
	abs, _ := filepath.Abs(filepath.Join(dir, "store"))
	if err == nil || !strings.Contains(err.Error(), "sluice log check --repair "+abs+"\n") || !strings.Contains(err.Error(), seg) {
		t.Fatalf("open of a damaged store: %v\nwant the segment %s and the command for %s", err, seg, abs)
	}
}

// TestSmallerMaxMessageKeepsStoredMessages: a store reopened with a
// smaller MaxMessageBytes (a sink restarted with a smaller --max-message)
// keeps the larger messages it stored, whether the last one or followed
// by others. Before, Open took them for damage: the last was quarantined
// (acknowledged data gone), an earlier one made the store refuse to open
// with advice (`log check --repair`) that changed nothing.
func TestSmallerMaxMessageKeepsStoredMessages(t *testing.T) {
	for _, last := range []bool{true, false} {
		t.Run(fmt.Sprintf("last=%v", last), func(t *testing.T) {
			dir := t.TempDir()
			quiet := slog.New(slog.DiscardHandler)
			s, _, err := Open(Options{DataDir: dir, MaxMessageBytes: 1 << 20, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			big := strings.Repeat("b", 200_000)
			msgs := []*store.Message{{Agent: "a", AgentB: []byte("a"), ID: 0, Codec: codec.Plain, Records: 1, Body: []byte(big)}}
			if !last {
				msgs = append(msgs, &store.Message{Agent: "a", AgentB: []byte("a"), ID: 1, Codec: codec.Plain, Records: 1, Body: []byte("small")})
			}
			if _, err := s.Append(msgs); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, d, err := Open(Options{DataDir: dir, MaxMessageBytes: 16 << 10, Logger: quiet})
			if err != nil {
				t.Fatalf("reopened with a smaller MaxMessageBytes: %v", err)
			}
			defer s.Close()
			if !d.Has("a", 0) || s.Log().NextOffset() != uint64(len(msgs)) {
				t.Fatalf("the large message is gone: next offset %d", s.Log().NextOffset())
			}
			if _, err := os.Stat(filepath.Join(dir, "store", "quarantine")); err == nil {
				t.Fatal("a stored message was quarantined")
			}
		})
	}
}
