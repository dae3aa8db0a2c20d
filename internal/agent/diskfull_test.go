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
	"github.com/sluicehq/sluice/internal/testtmpfs"
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
	ts := startSink(t, filepath.Join(t.TempDir(), "sink"), "127.0.0.1:0")
	defer ts.stop()
	ts.stop() // down while the spool fills
	mod := func(c *Config) {
		c.SinkAddr, c.SpoolQuota, c.Compression = ts.addr, 1<<30, codec.Plain // only the disk limits
		c.segmentBytes = 64 << 20                                             // one segment, larger than the disk
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
	}
	a := newTestAgent(t, spoolDir, mod)
	defer func() { a.Close() }()
	srv := httptest.NewServer(a.Handler())
	defer func() { srv.Close() }()

	accepted := map[string]bool{}
	req := 0
	post := func() int {
		recs := hexRecords(fmt.Sprint("q", req), 100, 200)
		req++
		status := postLines(t, srv.URL, recs)
		switch status {
		case http.StatusOK:
			for _, r := range recs {
				accepted[string(r)] = true
			}
		case http.StatusInsufficientStorage:
		default:
			t.Fatalf("request %d: status %d", req, status)
		}
		return status
	}
	fill := func() {
		t.Helper()
		for i := 0; ; i++ {
			if i == 1000 {
				t.Fatal("the disk never filled")
			}
			if post() != http.StatusOK {
				return
			}
		}
	}
	// acceptsAgain polls ingest until it answers 200, with a generous bound.
	acceptsAgain := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for post() != http.StatusOK {
			if time.Now().After(deadline) {
				t.Fatalf("%s: ingest still answers 507 with everything delivered (spool holds %d bytes; SpoolWritable: %v)",
					what, a.spool.Size(), a.SpoolWritable())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	fill()
	ts.start()
	waitAcked(t, a, 60*time.Second)
	acceptsAgain("after the drain")
	if err := a.SpoolWritable(); err != nil {
		t.Fatalf("SpoolWritable after ingest succeeded: %v", err)
	}

	// Again across a restart: the spool is full when the agent starts.
	ts.stop()
	fill()
	srv.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = newTestAgent(t, spoolDir, mod)
	srv = httptest.NewServer(a.Handler())
	ts.start()
	waitAcked(t, a, 60*time.Second)
	acceptsAgain("after a restart on the full spool")

	waitAcked(t, a, 60*time.Second)
	got := storedRecords(t, ts)
	if len(got) != len(accepted) {
		t.Fatalf("store holds %d records, %d were accepted", len(got), len(accepted))
	}
	for r, n := range got {
		if n != 1 || !accepted[r] {
			t.Fatalf("record %.20q stored %d times (accepted: %v)", r, n, accepted[r])
		}
	}
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
