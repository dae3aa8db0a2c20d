package sink

import (
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testkit/metrictest"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

const (
	edgeToken   = "edge-token-0123456789"
	readerToken = "reader-token-0123456789"
)

func tokenHarness(t *testing.T, token string) *harness {
	t.Helper()
	tokens, err := auth.ParseTokens(strings.NewReader(edgeToken + " edge-1\n" + readerToken + " *\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, logs: &syncbuf.Buffer{}}
	h.cfg = Config{DataDir: t.TempDir(), Tokens: tokens, Logger: slog.New(slog.NewTextHandler(h.logs, nil))}
	if token != "" {
		h.dial = []grpc.DialOption{grpc.WithPerRPCCredentials(grpctransport.NewBearer(token, true))}
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func TestAuth(t *testing.T) {
	// The agent's own token works; so does reading with a consumer token.
	h := tokenHarness(t, edgeToken)
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(0, "a"))
	a.Collect(0)

	b := h.open()
	b.Send(sinkclient.Hello("edge-2"))
	if err := b.Status(); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"edge-2"`) {
		t.Errorf("agent token sending as another agent: %v", err)
	}
	r := h.read(&sluicev1.ReadStart{})
	if err := r.Status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("agent token reading: %v", err)
	}

	h2 := tokenHarness(t, readerToken)
	r = h2.read(&sluicev1.ReadStart{})
	if e := r.Next().GetEnd(); e == nil {
		t.Errorf("consumer token reading: no EndOfLog")
	}
	c := h2.open()
	c.Send(sinkclient.Hello("*"))
	if err := c.Status(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("consumer token sending: %v", err)
	}

	for _, tok := range []string{"", "wrong-token-0123456789"} {
		h3 := tokenHarness(t, tok)
		d := h3.open()
		d.Send(sinkclient.Hello("edge-1"))
		if err := d.Status(); status.Code(err) != codes.Unauthenticated {
			t.Errorf("token %q: %v, want Unauthenticated", tok, err)
		}
	}
}

func TestFileName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"edge-1", "edge-1"},
		{"host.example.com", "host.example.com"},
		{".", "%2E"},
		{"..", "%2E."},
		{"a/b", "a%2Fb"},
		{"g/1 x", "g%2F1%20x"},
		{"%", "%25"},
		{"é", "%C3%A9"},
	}
	for _, tt := range tests {
		if got := fileName(tt.in); got != tt.want {
			t.Errorf("fileName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := fileName(strings.Repeat("/", 100))
	if !strings.HasPrefix(long, "%%") || len(long) != 66 {
		t.Errorf("long name: %q", long)
	}
	if fileName(strings.Repeat("/", 100)) == fileName(strings.Repeat("/", 101)) {
		t.Error("long names collide")
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(0, "a", "b"))
	a.Send(sinkclient.PlainRequest(1, "c"))
	a.Collect(0, 1)
	a.Send(sinkclient.PlainRequest(1, "c"))
	a.Collect(1)
	if msg, _ := h.s.LastError(); msg != "" {
		t.Fatalf("LastError %q before any failure", msg)
	}
	a.Send(&sluicev1.Request{Version: 1, MessageId: 2, RecordCount: 5, Payload: &sluicev1.Request_Plain{Plain: sinkclient.Body("x")}})
	a.ErrorFor(2)
	if msg, at := h.s.LastError(); !strings.HasPrefix(msg, "message 2 of agent edge-1 rejected") || at.IsZero() {
		t.Fatalf("LastError %q at %v after a rejected message", msg, at)
	}
	for name, want := range map[string]float64{
		"sluice_sink_stored_messages_total":               2,
		"sluice_sink_stored_records_total":                3,
		"sluice_sink_duplicate_messages_total":            1,
		"sluice_sink_received_messages_total":             4,
		"sluice_sink_rejected_total{reason=record_count}": 1,
		"sluice_sink_queued_messages":                     0,
		"sluice_sink_streams{kind=send}":                  1,
		"sluice_sink_acked_messages_total":                3,
	} {
		if got := metricValue(t, h, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	mfs, err := h.s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"sluice_sink_fsync_seconds", "sluice_sink_store_bytes", "sluice_sink_acks_sent_total",
		"sluice_sink_received_bytes_total", "sluice_sink_stored_bytes_total", "sluice_sink_queued_messages"} {
		if !names[n] {
			t.Errorf("metric %s not registered", n)
		}
	}
}

// metricValue returns the value of a counter or gauge, named as
// "name" or "name{label=value}".
func metricValue(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	return metrictest.Value(t, h.s.Registry(), name)
}

// TestAgents: the per-agent rows count each agent's stored records and
// duplicates over its sessions, say who is connected, and remember an
// agent after its session ended.
func TestAgents(t *testing.T) {
	h := newHarness(t, nil)
	a := h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(0, "a", "b"))
	a.Send(sinkclient.PlainRequest(1, "c"))
	a.Collect(0, 1)
	a.Send(sinkclient.PlainRequest(1, "c")) // a duplicate
	a.Collect(1)
	b := h.connect("edge-2")
	b.Send(sinkclient.PlainRequest(0, "x"))
	b.Collect(0)
	want := func(id string, connected int, records, dups uint64) {
		t.Helper()
		for _, r := range h.s.Agents() {
			if r.ID == id {
				if r.Connected != connected || r.Records != records || r.Duplicates != dups || r.LastSeen.IsZero() || r.Vouched != "" {
					t.Fatalf("%s: %+v, want connected %d, %d records, %d duplicates, a last-seen time, nothing vouched", id, r, connected, records, dups)
				}
				return
			}
		}
		t.Fatalf("%s not in %+v", id, h.s.Agents())
	}
	want("edge-1", 1, 3, 1)
	want("edge-2", 1, 1, 0)
	if err := a.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	<-a.End // the session has ended once its status arrived
	want("edge-1", 0, 3, 1)
	a = h.connect("edge-1")
	a.Send(sinkclient.PlainRequest(2, "d", "e"))
	a.Collect(2)
	want("edge-1", 1, 5, 1)
	if got := h.s.Agents(); len(got) != 2 || got[0].ID != "edge-1" || got[1].ID != "edge-2" {
		t.Fatalf("rows %+v, want edge-1 and edge-2 in order", got)
	}
}
