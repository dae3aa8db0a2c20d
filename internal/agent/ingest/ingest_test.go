package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/codec"
)

func TestSplitLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a\nb\n", "a|b"}, {"a\nb", "a|b"}, {"\n\na\r\n", "a\r"}, {"", ""}, {"\n", ""},
	} {
		recs, err := splitLines(nil, []byte(tc.in), 100)
		var parts []string
		for _, r := range recs {
			parts = append(parts, string(r))
		}
		if err != nil || strings.Join(parts, "|") != tc.want {
			t.Errorf("%q → %q %v, want %q", tc.in, parts, err, tc.want)
		}
	}
}

// TestBatcherLockHonoursContext: while the pipeline is full (a sealed
// message waits for the spool writer, the batcher's lock held), a second
// caller gives up when its context ends instead of waiting; once the
// pipeline drains, the lock is free again, and the first caller
// compresses the message it sealed itself, after letting go of the lock.
// The batcher has no goroutine of its own, so this is the only way a
// caller can leave.
func TestBatcherLockHonoursContext(t *testing.T) {
	work := make(chan *sealedMsg) // no worker: a message handed to one would block
	out := make(chan *sealedMsg)  // no spool writer: the first seal blocks
	var compressed []*sealedMsg
	compress := func(m *sealedMsg) { compressed = append(compressed, m); close(m.ready) }
	// zstd: a plain message needs no compression (frame).
	bt := newBatcher(&Config{MaxMessageBytes: 1 << 20, Linger: time.Hour, Compression: codec.Zstd}, work, out, compress)
	first := make(chan struct{})
	go func() {
		defer close(first)
		if err := bt.lock(context.Background()); err != nil {
			t.Error(err)
			return
		}
		bt.add(ingestReq{records: [][]byte{[]byte("a")}, whole: true, done: make(chan error, 1)})
		bt.unlock()
	}()
	// Wait until the first caller holds the lock (it then blocks in seal,
	// since nothing takes the message).
	for deadline := time.Now().Add(30 * time.Second); len(bt.sem) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first caller never took the lock")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := bt.lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with an ended context while the pipeline is full: %v, want context.Canceled", err)
	}
	m := <-out
	<-first
	if m == nil || m.records != 1 {
		t.Fatalf("sealed %+v", m)
	}
	if len(compressed) != 1 || compressed[0] != m {
		t.Fatalf("the sealing caller compressed %d messages, want its one", len(compressed))
	}
	if err := bt.lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	bt.unlock()
}
