package lines

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// Split drops empty lines (the client refuses empty records) and keeps a
// last line without its newline.
func TestSplit(t *testing.T) {
	got := Split([]byte("a\n\nbc\n\nd"))
	want := [][]byte{[]byte("a"), []byte("bc"), []byte("d")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Split = %q, want %q", got, want)
	}
	if got := Split([]byte("\n\n")); got != nil {
		t.Fatalf("Split of empty lines = %q, want none", got)
	}
}

// consume prints a plain record as it is, a collector's record readably
// (OTLP as JSON), and an unreadable marked record as a comment line
// instead of its bytes.
func TestRecordShowsMarkedRecordsReadably(t *testing.T) {
	if got := string(Record(nil, []byte("plain text"), 7)); got != "plain text" {
		t.Errorf("plain record printed as %q", got)
	}
	if got := string(Record(nil, telemetry.Append(nil, telemetry.OTLPTraces, nil), 7)); got != "{}" {
		t.Errorf("empty OTLP traces request printed as %q, want {}", got)
	}
	bad := telemetry.Append(nil, telemetry.RemoteWrite, []byte{0x0a, 0x7f})
	if got := string(Record(nil, bad, 7)); !strings.HasPrefix(got, "# sluice: unreadable record in the message at offset 7:") {
		t.Errorf("unreadable record printed as %q", got)
	}
}

// TestSendCountsRecords: Send's count is of the records the agent gets,
// empty lines left out. Before, `printf 'L1\n\nL3\n' | sluice produce`
// said 3 lines spooled for 2 records (found by hand, 2026-11-29).
func TestSendCountsRecords(t *testing.T) {
	var got atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Add(int64(len(Split(b))))
		w.WriteHeader(http.StatusOK)
	}))
	defer agent.Close()
	p, err := client.NewHTTPProducer(agent.URL)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Send(p, strings.NewReader("L1\n\nL3\n\n\nL6\n"), 1<<20, func(_ int, err error) error { return err }, nil)
	if err != nil || n != 3 || got.Load() != 3 {
		t.Fatalf("Send counted %d lines (%v), the agent got %d records; want 3 and 3", n, err, got.Load())
	}
}
