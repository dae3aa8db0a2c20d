package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/sinktest"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/seglog"
)

// ingestThroughFullSpool ingests 30 MiB (120 requests of 64 incompressible
// 4 KiB records) into a, retrying each request the spool refuses as full
// (ErrSpoolFull, 507) after 5 ms, and calling full each time; it fails
// the test on any other error, or when a request is still refused after
// 90 s (a bound on a broken run, not a measurement). It returns the
// records' 16-byte tags.
func ingestThroughFullSpool(t *testing.T, a *Agent, full func()) map[string]bool {
	t.Helper()
	ctx := context.Background()
	const requests, perRequest, size = 120, 64, 4096 // 30 MiB: over seven 4 MiB quotas
	want := map[string]bool{}
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; i < requests; i++ {
		recs := randomRecords(fmt.Sprint("req", i), perRequest, size)
		for refusals := 0; ; refusals++ {
			err := a.Ingest(ctx, recs)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrSpoolFull) {
				t.Fatalf("request %d: %v", i, err)
			}
			full()
			if time.Now().After(deadline) {
				t.Fatalf("request %d: still %v after %d refusals; spool holds %d bytes, %d messages parked",
					i, err, refusals+1, a.spool.Size(), a.Stats().Parked)
			}
			time.Sleep(5 * time.Millisecond) // wait for acks to free space
		}
		for _, r := range recs {
			want[string(r[:16])] = true
		}
	}
	return want
}

// wantStoredOnce checks that the sink's store holds exactly the records
// tagged in want, each once.
func wantStoredOnce(t *testing.T, ts *sinktest.Sink, want map[string]bool) {
	t.Helper()
	got := storedRecords(t, ts)
	if len(got) != len(want) {
		t.Fatalf("store holds %d records, want %d", len(got), len(want))
	}
	for r, n := range got {
		if n != 1 || !want[r[:16]] {
			t.Fatalf("record %.16q stored %d times", r, n)
		}
	}
}

// randomRecords returns n incompressible records of size bytes, each
// starting with a unique tag.
func randomRecords(tag string, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		r := make([]byte, size)
		rand.Read(r)
		copy(r, fmt.Sprintf("%s-%06d:", tag, i))
		out[i] = r
	}
	return out
}

// TestSmallQuotaKeepsFlowing: with a quota of a few MiB, far below the
// default segment size, continuous ingest against a live sink fills the
// quota (at least once: the sink is down until the first refusal, so
// that a slow machine, or -race, where delivery keeps up with the test's
// ingest, still fills it; more often where ingest outruns delivery), and
// every time acknowledged segments are freed, the consumed active segment
// included, so ingest resumes; every record ends up in the store exactly
// once.
func TestSmallQuotaKeepsFlowing(t *testing.T) {
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	ts.Stop() // its address kept: Restart at the first refusal
	const quota = 4 << 20
	a := newTestAgent(t, filepath.Join(dir, "spool"), func(c *Config) {
		c.SinkAddr, c.SpoolQuota, c.SpoolSync = ts.Addr, quota, seglog.SyncNone()
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 100*time.Millisecond
	})
	defer a.Close()
	if seg := a.cfg.spoolSegmentBytes(); seg > quota/2 {
		t.Fatalf("segment of %d bytes for a quota of %d", seg, quota)
	}
	fulls := 0
	want := ingestThroughFullSpool(t, a, func() {
		if fulls++; fulls == 1 {
			ts.Restart()
		}
	})
	if fulls == 0 {
		t.Fatal("the quota was never reached; the test proves nothing")
	}
	t.Logf("%d refusals with 507 on the way", fulls)
	waitAcked(t, a)
	wantStoredOnce(t, ts, want)
	// Everything acknowledged: at most the active segment is left.
	if sz := a.spool.Size(); sz > a.cfg.spoolSegmentBytes() {
		t.Errorf("spool holds %d bytes with everything acknowledged", sz)
	}
}

// TestDiskFullAnswers507AndRecovers: ENOSPC on a real (tmpfs) disk is 507
// Insufficient Storage like the quota, SpoolWritable reports it, and once
// space is freed ingest works again by itself; every record that was
// answered 200 is in the spool, also after a restart.
func TestDiskFullAnswers507AndRecovers(t *testing.T) {
	mnt := testtmpfs.Mount(t, "8m")
	// Leave about 2 MiB for the spool.
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 6<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spoolDir := filepath.Join(mnt, "spool")
	reg := prometheus.NewRegistry()
	a := newTestAgent(t, spoolDir, func(c *Config) { c.SpoolQuota, c.Registry = 1<<30, reg }) // only the disk limits
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	post := func(recs [][]byte) int {
		resp, err := http.Post(srv.URL+"/v1/records", "application/octet-stream", strings.NewReader(string(joinLines(recs))))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	var accepted []string
	status := 0
	for i := 0; i < 200; i++ {
		recs := hexRecords(fmt.Sprint("req", i), 16, 4096) // 64 KiB per request
		if status = post(recs); status != 200 {
			break
		}
		for _, r := range recs {
			accepted = append(accepted, string(r))
		}
	}
	if status != http.StatusInsufficientStorage {
		t.Fatalf("disk full answered %d, want 507", status)
	}
	if err := a.SpoolWritable(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("SpoolWritable with the disk full: %v", err)
	}
	if n := counterValue(t, reg, "sluice_agent_spool_no_space_total"); n < 1 {
		t.Fatalf("spool_no_space_total = %v after a refusal", n)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := a.SpoolWritable(); err != nil {
		t.Fatalf("SpoolWritable after freeing space: %v", err)
	}
	recs := hexRecords("after", 16, 4096)
	if status := post(recs); status != 200 {
		t.Fatalf("after freeing space: %d", status)
	}
	for _, r := range recs {
		accepted = append(accepted, string(r))
	}
	check := func(a *Agent) {
		t.Helper()
		if got := spooledRecords(t, a); strings.Join(got, "\n") != strings.Join(accepted, "\n") {
			t.Fatalf("spool holds %d records, %d were accepted", len(got), len(accepted))
		}
	}
	check(a)
	a.Close()
	a = newTestAgent(t, spoolDir, nil)
	defer a.Close()
	check(a)
}

// hexRecords returns n records of size hex digits (random, so they
// compress only by half), each starting with a unique tag.
func hexRecords(tag string, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, size/2)
		rand.Read(b)
		out[i] = []byte(fmt.Sprintf("%s-%04d:%x", tag, i, b)[:size])
	}
	return out
}

func joinLines(recs [][]byte) []byte {
	var out []byte
	for _, r := range recs {
		out = append(append(out, r...), '\n')
	}
	return out
}

// TestSpoolFillsDiskRecoversByItself: when the spool itself fills the
// disk, acknowledgements free it even though the state file cannot be
// written at that moment, so ingest resumes without anyone freeing space,
// and every record answered 200 reaches the sink exactly once.
func TestSpoolFillsDiskRecoversByItself(t *testing.T) {
	mnt := testtmpfs.Mount(t, "4m")
	dir := t.TempDir()
	ts := sinktest.Start(t, sink.Config{DataDir: filepath.Join(dir, "sink")}, "127.0.0.1:0")
	defer ts.Stop()
	// The sink is down at first, so the spool fills the disk.
	ts.Stop()
	a := newTestAgent(t, filepath.Join(mnt, "spool"), func(c *Config) {
		c.SinkAddr, c.SpoolQuota = ts.Addr, 1<<30 // only the disk limits
		c.ReconnectMin, c.ReconnectMax = 10*time.Millisecond, 50*time.Millisecond
	})
	defer a.Close()
	ctx := context.Background()
	want := map[string]bool{}
	ingest := func(i int) error {
		recs := hexRecords(fmt.Sprint("r", i), 16, 4096)
		err := a.Ingest(ctx, recs)
		if err == nil {
			for _, r := range recs {
				want[string(r)] = true
			}
		}
		return err
	}
	i := 0
	for ; i < 1000; i++ {
		if err := ingest(i); err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("request %d: %v, want ErrNoSpace", i, err)
			}
			break
		}
	}
	if i == 1000 {
		t.Fatal("the disk never filled")
	}
	// Take the last free pages too, so not even the small state file
	// can be written when the acks arrive.
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 1024; k++ {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	ts.Restart()
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; n < 50; i++ {
		err := ingest(i)
		switch {
		case err == nil:
			n++
		case errors.Is(err, ErrNoSpace) || errors.Is(err, ErrSpoolFull):
			if time.Now().After(deadline) {
				t.Fatalf("ingest still refused: %v", err)
			}
			time.Sleep(10 * time.Millisecond) // wait for acks to free space
		default:
			t.Fatal(err)
		}
	}
	waitAcked(t, a)
	got := storedRecords(t, ts)
	if len(got) != len(want) {
		t.Fatalf("store holds %d records, %d were accepted", len(got), len(want))
	}
	for r, n := range got {
		if n != 1 || !want[r] {
			t.Fatalf("record %.20q stored %d times", r, n)
		}
	}
}

// counterValue reads one counter from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestRequestOverHalfQuota: a request that could never fit beside the
// spool's other contents is 413 at once instead of 507 forever.
func TestRequestOverHalfQuota(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.SpoolQuota = 2 << 20 })
	defer a.Close()
	err := a.Ingest(context.Background(), randomRecords("big", 300, 4096)) // 1.2 MiB
	if !errors.Is(err, ErrRecordTooLarge) || !strings.Contains(err.Error(), "over half the spool quota") {
		t.Fatalf("request over half the quota: %v", err)
	}
	if err := a.Ingest(context.Background(), randomRecords("small", 10, 4096)); err != nil {
		t.Fatal(err)
	}
}

// TestConfigErrorsNameFlags: the range errors of the agent's config say
// the flag and human-readable sizes as well as the field, since the CLI
// passes them on as they are (found by hand: "SpoolQuota 1048576 below
// 2097152").
func TestConfigErrorsNameFlags(t *testing.T) {
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.SpoolQuota = 1 << 20 }, "SpoolQuota (--spool-quota) 1MiB below 2MiB"},
		{func(c *Config) { c.MaxMessageBytes = 8 << 20 }, "MaxMessageBytes (--max-message) 8MiB outside 1KiB to 4MiB"},
	} {
		cfg := Config{SinkAddr: "127.0.0.1:1", SpoolDir: t.TempDir()}
		cfg.setDefaults()
		c.mod(&cfg)
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate: %v, want %q", err, c.want)
		}
	}
}
