package sink

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// read opens a raw Read stream from start: the test plays the consumer.
func (h *harness) read(start *sluicev1.ReadStart) *sinkclient.Reader {
	h.t.Helper()
	return sinkclient.OpenReader(h.t, h.client, start)
}

// readAll reads the store from offset from to its end.
func readAll(t *testing.T, h *harness, from uint64) []*sluicev1.StoredMessage {
	t.Helper()
	r := h.read(&sluicev1.ReadStart{FromOffset: from})
	r.Request(1 << 20)
	var out []*sluicev1.StoredMessage
	for {
		m := r.Next()
		if m.GetEnd() != nil {
			break
		}
		out = append(out, m.GetMessage())
	}
	if err := r.Status(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fill stores n messages of agent "edge-1", ids 0..n-1.
func fill(t *testing.T, h *harness, from, n uint64) {
	t.Helper()
	a := h.connect("edge-1")
	var ids []uint64
	for id := from; id < from+n; id++ {
		a.Send(sinkclient.PlainRequest(id, sinkclient.Records(id, 2)...))
		ids = append(ids, id)
	}
	a.Collect(ids...)
}

// TestReadCredits: the sink never has more messages in flight than the
// consumer granted, then sends EndOfLog and ends the stream.
func TestReadCredits(t *testing.T) {
	h := newHarness(t, nil)
	fill(t, h, 0, 10)
	r := h.read(&sluicev1.ReadStart{})
	r.None(quiet) // no credit, not caught up: nothing
	r.Request(3)
	for i := range uint64(3) {
		m := r.Next().GetMessage()
		if m.GetOffset() != i || m.GetAgentId() != "edge-1" || m.GetMessageId() != i || !slices.Equal(strs(m.GetRecords()), sinkclient.Records(i, 2)) {
			t.Fatalf("message %d: %v", i, m)
		}
	}
	r.None(quiet)
	r.Request(4)
	for i := uint64(3); i < 7; i++ {
		if m := r.Next().GetMessage(); m.GetOffset() != i {
			t.Fatalf("got %v, want offset %d", m, i)
		}
	}
	r.None(quiet)
	r.Request(100)
	for i := uint64(7); i < 10; i++ {
		if m := r.Next().GetMessage(); m.GetOffset() != i {
			t.Fatalf("got %v, want offset %d", m, i)
		}
	}
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != 10 {
		t.Fatalf("want EndOfLog{10}, got %v", e)
	}
	if err := r.Status(); err != nil {
		t.Fatalf("non-follow read ended with %v", err)
	}

	// From the middle, and at the end (EndOfLog at once, without credit).
	if got := readAll(t, h, 6); len(got) != 4 || got[0].Offset != 6 {
		t.Fatalf("read from 6: %v", got)
	}
	r = h.read(&sluicev1.ReadStart{FromOffset: 10})
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != 10 {
		t.Fatalf("read at the end: want EndOfLog{10}, got %v", e)
	}
	// Beyond the end.
	r = h.read(&sluicev1.ReadStart{FromOffset: 11})
	if err := r.Status(); status.Code(err) != codes.OutOfRange {
		t.Fatalf("read from 11 of 10: %v", err)
	}
}

func TestReadFollow(t *testing.T) {
	h := newHarness(t, nil)
	fill(t, h, 0, 2)
	r := h.read(&sluicev1.ReadStart{Follow: true})
	r.Request(3)
	r.Next()
	r.Next()
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != 2 {
		t.Fatalf("want EndOfLog{2}, got %v", e)
	}
	r.None(quiet) // follows: the stream stays open
	fill(t, h, 2, 3)
	if m := r.Next().GetMessage(); m.GetOffset() != 2 || m.GetMessageId() != 2 {
		t.Fatalf("followed message %v", m)
	}
	// Credit used up: no message, though an EndOfLog{3} may come if the
	// reader caught up before messages 3 and 4 were stored.
	select {
	case m := <-r.Resps:
		if e := m.GetEnd(); e == nil || e.NextOffset != 3 {
			t.Fatalf("sent %v without credit", m)
		}
	case <-time.After(quiet):
	}
	r.Request(10)
	for i := uint64(3); i < 5; i++ {
		if m := r.Next().GetMessage(); m.GetOffset() != i {
			t.Fatalf("got %v, want offset %d", m, i)
		}
	}
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != 5 {
		t.Fatalf("want EndOfLog{5}, got %v", e)
	}
	// Close ends a following read with Unavailable.
	done := make(chan error, 1)
	go func() { done <- h.s.Close() }()
	if err := r.Status(); status.Code(err) != codes.Unavailable {
		t.Fatalf("follow at Close: %v", err)
	}
	<-done
}

// TestGroups: a group's committed offset survives a restart, and
// from_committed resumes there.
func TestGroups(t *testing.T) {
	h := newHarness(t, nil)
	fill(t, h, 0, 6)
	r := h.read(&sluicev1.ReadStart{FromCommitted: true, Group: "g/1"}) // no commit yet: from_offset 0
	r.Request(2)
	r.Next()
	if m := r.Next().GetMessage(); m.GetOffset() != 1 {
		t.Fatalf("got %v", m)
	}
	r.Commit(2)
	r.Request(10)
	for range 4 {
		r.Next()
	}
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != 6 {
		t.Fatalf("want EndOfLog{6}, got %v", e)
	}
	// With a group, the read waits for the consumer to close its side, so
	// that its last commits are applied.
	r.None(quiet)
	if err := r.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := r.Status(); err != nil {
		t.Fatal(err)
	}

	h.restart()
	r = h.read(&sluicev1.ReadStart{FromCommitted: true, Group: "g/1"})
	r.Request(100)
	if m := r.Next().GetMessage(); m.GetOffset() != 2 {
		t.Fatalf("resumed at %v, want offset 2", m)
	}
	// from_offset wins without from_committed.
	if got := readAll(t, h, 5); len(got) != 1 || got[0].Offset != 5 {
		t.Fatalf("read from 5: %v", got)
	}
	// Another group starts from from_offset.
	r = h.read(&sluicev1.ReadStart{FromCommitted: true, FromOffset: 4, Group: "other"})
	r.Request(1)
	if m := r.Next().GetMessage(); m.GetOffset() != 4 {
		t.Fatalf("new group started at %v, want 4", m)
	}
	// A following consumer ends its read by closing its side, after its
	// commit.
	r = h.read(&sluicev1.ReadStart{FromCommitted: true, Group: "g/1", Follow: true})
	r.Request(100)
	for range 4 {
		r.Next()
	}
	r.Next() // EndOfLog
	r.Commit(6)
	if err := r.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := r.Status(); err != nil {
		t.Fatal(err)
	}
	r = h.read(&sluicev1.ReadStart{FromCommitted: true, Group: "g/1"})
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != 6 {
		t.Fatalf("after committing 6: %v", e)
	}
}

func TestReadErrors(t *testing.T) {
	h := newHarness(t, nil)
	fill(t, h, 0, 1)
	tests := []struct {
		name  string
		start *sluicev1.ReadStart
		then  *sluicev1.ReadRequest
		code  codes.Code
		msg   string
	}{
		{"no start", nil, &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_RequestN{RequestN: 1}}, codes.InvalidArgument, "must carry a ReadStart"},
		{"from_committed without group", &sluicev1.ReadStart{FromCommitted: true}, nil, codes.InvalidArgument, "needs a group"},
		{"commit without group", &sluicev1.ReadStart{Follow: true}, &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: 1}}, codes.InvalidArgument, "commit without a group"},
		{"commit beyond the end", &sluicev1.ReadStart{Follow: true, Group: "g"}, &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Commit{Commit: 9}}, codes.InvalidArgument, "beyond"},
		{"second start", &sluicev1.ReadStart{Follow: true}, &sluicev1.ReadRequest{Body: &sluicev1.ReadRequest_Start{Start: &sluicev1.ReadStart{}}}, codes.InvalidArgument, "second ReadStart"},
		{"long group", &sluicev1.ReadStart{Group: strings.Repeat("g", 256)}, nil, codes.InvalidArgument, "group name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.read(tt.start)
			if tt.then != nil {
				r.Send(tt.then)
			}
			err := r.Status()
			if status.Code(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("read ended with %v, want %v containing %q", err, tt.code, tt.msg)
			}
		})
	}
}
