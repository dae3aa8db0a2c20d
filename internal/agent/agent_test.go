package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
)

var quietLog = slog.New(slog.DiscardHandler)

// newTestAgent starts an agent whose sink address accepts no connections,
// so everything stays in the spool.
func newTestAgent(t testing.TB, dir string, mod func(*Config)) *Agent {
	t.Helper()
	cfg := Config{SinkAddr: "127.0.0.1:1", SpoolDir: dir, Logger: quietLog, ReconnectMin: time.Hour, ReconnectMax: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// spooledRecords decodes every record in the spool from its watermark.
func spooledRecords(t *testing.T, a *Agent) []string {
	t.Helper()
	dec := codec.NewDecoder(8 << 20)
	var out []string
	it := a.spool.Log().NewIterator(a.spool.AckedWatermark(), 1<<20)
	for it.Next() {
		m, err := spool.Decode(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		body, err := dec.Decode(nil, m.Body, m.Kind, m.DictID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := batch.Decode(body, func(rec []byte) error { out = append(out, string(rec)); n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if uint32(n) != m.Records {
			t.Fatalf("message %d says %d records, holds %d", it.Offset(), m.Records, n)
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// TestIngestIsDurableBeforeReturn: once Ingest returns, the records are in
// the spool, packed into messages no larger than the limit, and they are
// still there after a restart.
func TestIngestIsDurableBeforeReturn(t *testing.T) {
	dir := t.TempDir()
	a := newTestAgent(t, dir, func(c *Config) { c.MaxMessageBytes = 4096 })
	var want []string
	for i := 0; i < 50; i++ {
		var recs [][]byte
		for j := 0; j < 20; j++ {
			r := fmt.Sprintf("rec-%d-%d-%s", i, j, strings.Repeat("x", (i*j)%97))
			recs = append(recs, []byte(r))
			want = append(want, r)
		}
		if err := a.Ingest(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
	}
	if got := spooledRecords(t, a); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("spool holds %d records, want %d", len(got), len(want))
	}
	if a.spool.Log().NextOffset() < 5 {
		t.Fatalf("expected several messages of ≤4 KiB, got %d", a.spool.Log().NextOffset())
	}
	a.Close()
	a = newTestAgent(t, dir, nil)
	defer a.Close()
	if got := spooledRecords(t, a); len(got) != len(want) {
		t.Fatalf("after restart %d records", len(got))
	}
	id := a.ID()
	if !strings.HasPrefix(id, "agent-") {
		t.Fatalf("agent id %q", id)
	}
}

func TestAgentIDIsStable(t *testing.T) {
	dir := t.TempDir()
	a := newTestAgent(t, dir, nil)
	id := a.ID()
	a.Close()
	a = newTestAgent(t, dir, nil)
	defer a.Close()
	if a.ID() != id {
		t.Fatalf("id changed: %s → %s", id, a.ID())
	}
}

// TestIngestHTTP: the status codes of POST /v1/records.
func TestIngestHTTP(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.MaxRecordBytes = 100; c.SpoolQuota = 2 << 20 })
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/records", "application/x-ndjson", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"two records", "a\nb\n", 200},
		{"no final newline", "a\nb", 200},
		{"empty lines skipped", "\n\na\n\n", 200},
		{"record over limit", "ok\n" + strings.Repeat("x", 101) + "\n", 413},
		{"no records", "\n\n", 400},
		{"empty body", "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, msg := post(tc.body); got != tc.want {
				t.Fatalf("status %d (%s), want %d", got, msg, tc.want)
			}
		})
	}
	resp, err := http.Get(srv.URL + "/v1/records")
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v", resp.StatusCode, err)
	}
	// Fill the quota: incompressible records until 507.
	big := make([]byte, 0, 8<<10)
	for i := 0; i < 80; i++ {
		r := make([]byte, 45)
		rand.Read(r)
		big = append(big, fmt.Sprintf("%x", r)...)
		big = append(big, '\n')
	}
	got := 0
	for i := 0; i < 4000 && got != 507; i++ {
		got, _ = post(string(big))
	}
	if got != 507 {
		t.Fatalf("spool quota never reached: %d", got)
	}
	if err := a.SpoolWritable(); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("SpoolWritable with the quota reached: %v", err)
	}
}

func TestIngestRejectsOversizeRecord(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.MaxRecordBytes = 10 })
	defer a.Close()
	err := a.Ingest(context.Background(), [][]byte{[]byte("short"), []byte("far too long")})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("%v", err)
	}
	if n := a.spool.Log().NextOffset(); n != 0 {
		t.Fatalf("a partial request was spooled: %d messages", n)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{SpoolDir: "x"},
		{SinkAddr: "x"},
		{SinkAddr: "x", SpoolDir: "x", MaxMessageBytes: 8 << 20},
		{SinkAddr: "x", SpoolDir: "x", Compression: codec.ZstdDict},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// TestIngestIdempotent: a retried request (same producer and sequence) is
// answered without being spooled again, also after a restart.
func TestIngestIdempotent(t *testing.T) {
	dir := t.TempDir()
	a := newTestAgent(t, dir, nil)
	ctx := context.Background()
	send := func(a *Agent, seq uint64, recs ...string) bool {
		t.Helper()
		var rs [][]byte
		for _, r := range recs {
			rs = append(rs, []byte(r))
		}
		dup, err := a.IngestFrom(ctx, "prod-1", seq, rs)
		if err != nil {
			t.Fatal(err)
		}
		return dup
	}
	if send(a, 1, "a", "b") || send(a, 2, "c") {
		t.Fatal("first sends reported as duplicates")
	}
	if !send(a, 2, "c") || !send(a, 1, "a", "b") {
		t.Fatal("retries not recognised")
	}
	a.Close()
	a = newTestAgent(t, dir, nil)
	if !send(a, 2, "c") {
		t.Fatal("retry after restart not recognised")
	}
	if send(a, 3, "d") {
		t.Fatal("new request reported as duplicate")
	}
	if got := strings.Join(spooledRecords(t, a), ","); got != "a,b,c,d" {
		t.Fatalf("spool holds %s", got)
	}
	// The table also survives the spool being acknowledged and removed.
	if err := a.spool.Acknowledge(a.spool.Log().NextOffset()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a = newTestAgent(t, dir, nil)
	defer a.Close()
	if !send(a, 3, "d") {
		t.Fatal("retry after acknowledgement not recognised")
	}
	if _, err := a.IngestFrom(ctx, "prod-1", 0, [][]byte{[]byte("x")}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("seq 0: %v", err)
	}
}

// TestIngestMessageKeepsBoundaries: each IngestMessage call is exactly one
// spooled message, even when several would fit together.
func TestIngestMessageKeepsBoundaries(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.MaxMessageBytes = 4096 })
	defer a.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if err := a.IngestMessage(ctx, [][]byte{[]byte(fmt.Sprint("m", i, "a")), []byte(fmt.Sprint("m", i, "b"))}); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.spool.Log().NextOffset(); n != 5 {
		t.Fatalf("%d messages spooled, want 5", n)
	}
	if err := a.IngestMessage(ctx, [][]byte{make([]byte, 3000), make([]byte, 3000)}); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversize message: %v", err)
	}
}

// TestIngestHTTPLargeBody: every line of a multi-megabyte body arrives
// intact and in order.
func TestIngestHTTPLargeBody(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), nil)
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	var body bytes.Buffer
	var want []string
	for i := 0; i < 60000; i++ {
		line := fmt.Sprintf("line %06d %s", i, strings.Repeat("v", i%50))
		want = append(want, line)
		body.WriteString(line + "\n")
	}
	resp, err := http.Post(srv.URL+"/v1/records", "application/x-ndjson", &body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if got := spooledRecords(t, a); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("spooled records differ from the body (%d vs %d lines)", len(got), len(want))
	}
}

// TestIngestResumesPartialRequest: after a crash in the middle of a request
// split over several messages, the retry spools only what is missing.
func TestIngestResumesPartialRequest(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), nil)
	defer a.Close()
	// What a crash after the first of two messages leaves behind.
	a.spool.Completed([]spool.Mark{{Producer: "p", Seq: 4, Done: 2}})
	recs := [][]byte{[]byte("r0"), []byte("r1"), []byte("r2"), []byte("r3")}
	if dup, err := a.IngestFrom(context.Background(), "p", 4, recs); err != nil || dup {
		t.Fatalf("%v %v", dup, err)
	}
	if got := strings.Join(spooledRecords(t, a), ","); got != "r2,r3" {
		t.Fatalf("spooled %s, want r2,r3", got)
	}
	if p := a.spool.ProgressOf("p"); p != (spool.Progress{Seq: 4, Done: 4, Complete: true}) {
		t.Fatalf("progress %+v", p)
	}
	if dup, _ := a.IngestFrom(context.Background(), "p", 4, recs); !dup {
		t.Fatal("complete request not recognised")
	}
}

// TestSplitRequestMarksEveryPart: a request spanning messages leaves a
// progress mark in each of them.
func TestSplitRequestMarksEveryPart(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.MaxMessageBytes = 1024 })
	defer a.Close()
	var recs [][]byte
	for i := 0; i < 40; i++ {
		recs = append(recs, bytes.Repeat([]byte{'a' + byte(i%26)}, 100))
	}
	if _, err := a.IngestFrom(context.Background(), "p", 1, recs); err != nil {
		t.Fatal(err)
	}
	it := a.spool.Log().NewIterator(0, 1<<20)
	var last spool.Mark
	n := 0
	for it.Next() {
		m, err := spool.Decode(it.Value())
		if err != nil || len(m.Marks) != 1 {
			t.Fatalf("message %d: %+v %v", it.Offset(), m.Marks, err)
		}
		if mk := m.Marks[0]; mk.Done <= last.Done || mk.Done-last.Done != m.Records {
			t.Fatalf("message %d: mark %+v after %+v with %d records", it.Offset(), mk, last, m.Records)
		}
		last = m.Marks[0]
		n++
	}
	if n < 3 || !last.Complete || last.Done != 40 {
		t.Fatalf("%d messages, last mark %+v", n, last)
	}
}

// TestQuotaCountsCompressedBytes: the quota applies to what the spool
// takes on disk, so highly compressible records do not trip it early.
func TestQuotaCountsCompressedBytes(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.SpoolQuota = 4 << 20 })
	defer a.Close()
	rec := bytes.Repeat([]byte(`cpu_seconds_total{host="a"} 1 `), 30) // compresses very well
	var batch [][]byte
	for i := 0; i < 1000; i++ {
		batch = append(batch, rec)
	}
	// 40 × ~1 MB of records: ten times the quota uncompressed.
	for i := 0; i < 40; i++ {
		if err := a.Ingest(context.Background(), batch); err != nil {
			t.Fatalf("after %d MB uncompressed: %v (spool %d bytes)", i, err, a.spool.Size())
		}
	}
	if sz := a.spool.Size(); sz > 4<<20 {
		t.Fatalf("spool accounts %d bytes", sz)
	}
}
