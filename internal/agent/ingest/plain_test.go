package ingest

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
)

// TestPlainMessageIsItsRecord: a plain message becomes its spool record
// where the batcher built it, the header written in front (no copy of the
// body) by frame, without a compression worker; a message whose marks do
// not fit in front is left to the compressor, which copies it, and both
// decode to the same records.
func TestPlainMessageIsItsRecord(t *testing.T) {
	g := &Ingester{log: slog.New(slog.DiscardHandler), encs: newEncoderStack(1)}
	g.encs.put(&encoder{Encoder: codec.NewEncoder(codec.LevelDefault)})
	work := make(chan *sealedMsg, 2)
	done := make(chan struct{})
	go func() { g.compressor(work); close(done) }()

	seal := func(marks []spool.Mark) (m *sealedMsg, last *byte) {
		b := getBuilder(64 << 10)
		for _, r := range []string{"one", "two", "three"} {
			if err := b.Add([]byte(r)); err != nil {
				t.Fatal(err)
			}
		}
		body := b.Bytes()
		m = &sealedMsg{b: b, kind: codec.Plain, records: b.Count(), raw: b.Len(), marks: marks, ready: make(chan struct{})}
		if !frame(m) {
			work <- m
		}
		<-m.ready
		return m, &body[len(body)-1]
	}
	check := func(m *sealedMsg) {
		t.Helper()
		rec, err := spool.Decode(*m.rec)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		if err := batch.Decode(rec.Body, func(r []byte) error { got = append(got, string(r)); return nil }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != "one,two,three" || rec.Kind != codec.Plain || rec.Records != 3 || m.payload != len(rec.Body) {
			t.Fatalf("record %+v holds %q", rec, got)
		}
	}

	m, last := seal(nil)
	check(m)
	if r := *m.rec; &r[len(r)-1] != last {
		t.Fatal("the plain message was copied into its spool record")
	}
	long := []spool.Mark{{Producer: strings.Repeat("p", spool.MaxProducerIDLen), Seq: 1, Done: 3, Complete: true},
		{Producer: strings.Repeat("q", spool.MaxProducerIDLen), Seq: 2, Done: 3, Complete: true}}
	m, last = seal(long)
	check(m)
	if r := *m.rec; &r[len(r)-1] == last {
		t.Fatal("marks longer than the headroom were written over the batch's memory")
	}
	close(work)
	<-done
}

// TestDeclaredLengthReservesLittle: the buffer for a body is sized from
// its Content-Length only up to maxPooledBody; a client that declares
// 64 MiB and sends four bytes gets a small buffer (it got 64 MiB).
func TestDeclaredLengthReservesLittle(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/records", strings.NewReader("a\nb\n"))
	r.ContentLength = MaxRequestBytes
	var body bytes.Buffer
	if _, err := readBody(httptest.NewRecorder(), r, &body, time.Minute); err != nil {
		t.Fatal(err)
	}
	if body.Cap() > maxPooledBody+bytes.MinRead {
		t.Fatalf("a body of %d bytes declared as %d reserved %d bytes", body.Len(), r.ContentLength, body.Cap())
	}
	// A body the size it declares, within maxPooledBody, still gets one
	// buffer of about its size (not doubled while read).
	data := strings.Repeat("record\n", 100_000)
	r = httptest.NewRequest("POST", "/v1/records", strings.NewReader(data))
	body = bytes.Buffer{}
	if _, err := readBody(httptest.NewRecorder(), r, &body, time.Minute); err != nil {
		t.Fatal(err)
	}
	if body.Cap() > len(data)+len(data)/8 {
		t.Fatalf("a body of %d bytes got a buffer of %d: grown while read, not sized up front", len(data), body.Cap())
	}
}
