package agent

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/seglog"
)

// postLines posts recs, one per line, to an agent's ingest API and returns
// the status.
func postLines(t *testing.T, url string, recs [][]byte) int {
	t.Helper()
	resp, err := http.Post(url+"/v1/records", "application/octet-stream", strings.NewReader(string(joinLines(recs))))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFullDiskAckedActiveSegmentReleased is issue 23's report: the spool
// is alone on a disk smaller than its segment size (the quota far larger),
// the sink is down, and plain 200-byte records are posted until ingest
// answers 507. Once the sink is up and everything is delivered, the one
// segment is fully acknowledged but still the active one, and nothing else
// can be freed: ingest must accept again by itself, without a restart (it
// used to answer 507 forever, after a restart too). Then again with the
// agent restarted on the full spool. Every record answered 200 reaches the
// sink exactly once.
func TestFullDiskAckedActiveSegmentReleased(t *testing.T) {
	mnt := testtmpfs.Mount(t, "4m")
	spoolDir := filepath.Join(mnt, "spool")
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(t.TempDir(), "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	ts.Stop() // down while the spool fills
	mod := func(c *Config) {
		c.SinkAddr, c.SpoolQuota, c.Compression = ts.Addr, 1<<30, codec.Plain // only the disk limits
		c.segmentBytes = 64 << 20                                             // one segment, larger than the disk
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
	}
	a := newTestAgent(t, spoolDir, mod)
	defer func() { a.Close() }()
	srv := httptest.NewServer(a.Handler())
	defer func() { srv.Close() }()

	r := &fullDiskRun{t: t, a: a, url: srv.URL, accepted: map[string]bool{}}
	r.fill()
	ts.Restart()
	waitAcked(t, a)
	r.acceptsAgain("after the drain")
	if err := a.SpoolWritable(); err != nil {
		t.Fatalf("SpoolWritable after ingest succeeded: %v", err)
	}

	// Again across a restart: the spool is full when the agent starts.
	ts.Stop()
	r.fill()
	srv.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = newTestAgent(t, spoolDir, mod)
	srv = httptest.NewServer(a.Handler())
	r.a, r.url = a, srv.URL
	ts.Restart()
	waitAcked(t, a)
	r.acceptsAgain("after a restart on the full spool")
	r.deliveredOnce(ts)
}

// fullDiskRun posts plain 200-byte records to an agent whose spool's disk
// fills, and remembers those answered 200.
type fullDiskRun struct {
	t        *testing.T
	a        *Agent
	url      string
	accepted map[string]bool
	req      int
}

// post sends one request of 100 records and returns the status, which
// must be 200 or 507.
func (r *fullDiskRun) post() int {
	r.t.Helper()
	recs := hexRecords(fmt.Sprint("q", r.req), 100, 200)
	r.req++
	status := postLines(r.t, r.url, recs)
	switch status {
	case http.StatusOK:
		for _, rec := range recs {
			r.accepted[string(rec)] = true
		}
	case http.StatusInsufficientStorage:
	default:
		r.t.Fatalf("request %d: status %d", r.req, status)
	}
	return status
}

// fill posts until the disk is full (507).
func (r *fullDiskRun) fill() {
	r.t.Helper()
	for i := 0; ; i++ {
		if i == 1000 {
			r.t.Fatal("the disk never filled")
		}
		if r.post() != http.StatusOK {
			return
		}
	}
}

// acceptsAgain polls ingest until it answers 200, with a generous bound.
func (r *fullDiskRun) acceptsAgain(what string) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for r.post() != http.StatusOK {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: ingest still answers 507 with everything delivered (spool holds %d bytes; SpoolWritable: %v)",
				what, r.a.spool.Size(), r.a.SpoolWritable())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.a.SpoolWritable(); err != nil {
		r.t.Fatalf("%s: SpoolWritable after ingest succeeded: %v", what, err)
	}
}

// deliveredOnce waits until everything is acknowledged and checks that
// the sink stored every accepted record exactly once, and nothing else.
func (r *fullDiskRun) deliveredOnce(ts *sinktest.Sink) {
	r.t.Helper()
	waitAcked(r.t, r.a)
	got := storedRecords(r.t, ts)
	if len(got) != len(r.accepted) {
		r.t.Fatalf("store holds %d records, %d were accepted", len(got), len(r.accepted))
	}
	for rec, n := range got {
		if n != 1 || !r.accepted[rec] {
			r.t.Fatalf("record %.20q stored %d times (accepted: %v)", rec, n, r.accepted[rec])
		}
	}
}

// TestSpoolSegmentsFitTheDisk: with the default quota (1 GiB, so 64 MiB
// segments) on an 8 MiB disk, the agent sizes segments from the disk too,
// so the full spool is several segments and the sealed ones are freed as
// the sink acknowledges them; ingest accepts again after the drain and
// every accepted record is stored once.
func TestSpoolSegmentsFitTheDisk(t *testing.T) {
	mnt := testtmpfs.Mount(t, "8m")
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(t.TempDir(), "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	ts.Stop()
	a := newTestAgent(t, filepath.Join(mnt, "spool"), func(c *Config) {
		c.SinkAddr, c.Compression = ts.Addr, codec.Plain
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
	})
	defer a.Close()
	if seg := a.cfg.spoolSegmentBytes(); seg > 1<<20 {
		t.Fatalf("segments of %d bytes on an 8 MiB disk, want at most 1 MiB", seg)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	r := &fullDiskRun{t: t, a: a, url: srv.URL, accepted: map[string]bool{}}
	r.fill()
	segs, err := filepath.Glob(filepath.Join(mnt, "spool", "log", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("the full spool is %d segments, want at least 4", len(segs))
	}
	ts.Restart()
	waitAcked(t, a)
	r.acceptsAgain("after the drain")
	r.deliveredOnce(ts)
}

// TestStartOnFullAcknowledgedSpool: an agent starts on a spool that fills
// its disk with one segment all of whose messages the sink acknowledged
// (left so by an older agent, or by a crash between persisting the
// watermark and freeing the segment). There is no backlog, so no
// acknowledgement comes to free it: the start must, and the very first
// request is accepted (it used to be 507, forever).
func TestStartOnFullAcknowledgedSpool(t *testing.T) {
	mnt := testtmpfs.Mount(t, "4m")
	spoolDir := filepath.Join(mnt, "spool")
	sp, err := spool.Open(spoolDir, 1<<30, "", quietLog, seglog.WithSegmentBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	// A page or two kept aside for the state file, written afterwards.
	reserve := filepath.Join(mnt, "reserve")
	if err := os.WriteFile(reserve, make([]byte, 8<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := spool.Append(nil, spool.Record{Kind: codec.Plain, Records: 1, Body: make([]byte, 16<<10)})
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the disk never filled")
		}
		if _, err := sp.Log().Append([][]byte{rec}); err != nil {
			if !spool.IsNoSpace(err) {
				t.Fatal(err)
			}
			break
		}
	}
	next := sp.Log().NextOffset()
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	// What the sink acknowledged, as the agent persists it. The disk
	// keeps less free than the request below needs.
	if err := os.Remove(reserve); err != nil {
		t.Fatal(err)
	}
	if err := spool.WriteState(spoolDir, next); err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t, spoolDir, func(c *Config) {
		c.SpoolQuota, c.Compression, c.segmentBytes = 1<<30, codec.Plain, 64<<20
	})
	defer a.Close()
	if err := a.SpoolWritable(); err != nil {
		t.Fatalf("SpoolWritable at the start: %v", err)
	}
	recs := hexRecords("after-start", 1000, 200) // 200 kB
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	if status := postLines(t, srv.URL, recs); status != http.StatusOK {
		t.Fatalf("first request after the start: %d, want 200 (spool holds %d bytes)", status, a.spool.Size())
	}
	if first := a.spool.Log().FirstOffset(); first != next {
		t.Fatalf("the log starts at %d, want the watermark %d", first, next)
	}
	if got := spooledRecords(t, a); strings.Join(got, "\n") != string(joinLines(recs[:len(recs)-1]))+string(recs[len(recs)-1]) {
		t.Fatalf("spool holds %d records from the watermark, want the %d accepted", len(got), len(recs))
	}
}
