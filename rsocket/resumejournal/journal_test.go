package resumejournal

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/testtmpfs"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/echo"
	"github.com/sluicehq/sluice/rsocket/internal/resumetest"
	"github.com/sluicehq/sluice/seglog"
)

// journalServer serves newEcho with resumption backed by a
// Store on dir. stop ends the server the way a crash
// does, for the session's client: its transports drop without an ERROR,
// and the store is closed without ending any session.
type journalServer struct {
	addr  string
	store *Store
	stop  func()
}

func startJournalServer(t *testing.T, dir string, cfg Config) *journalServer {
	t.Helper()
	return startJournalServerOn(t, "tcp", dir, cfg, rsocket.ResumeConfig{})
}

// startJournalServerOn is startJournalServer on a tcp:// or tls://
// listener, with rcfg (its Store set here) and opts.
func startJournalServerOn(t *testing.T, scheme, dir string, cfg Config, rcfg rsocket.ResumeConfig, opts ...rsocket.Option) *journalServer {
	t.Helper()
	store, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, _, err := rsocket.Listen(scheme + "://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	rcfg.Store = store
	opts = append(opts[:len(opts):len(opts)], rsocket.WithResume(rcfg))
	go func() {
		defer close(done)
		_ = rsocket.Serve(ctx, ln, &echo.Responder{}, opts...)
	}()
	s := &journalServer{addr: ln.Addr().String(), store: store}
	var stopped bool
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		_ = store.Close()
	}
	t.Cleanup(s.stop)
	return s
}

// TestResumeAcrossServerRestart: a client streams 200,000 items from a
// server whose sessions are journaled; the server dies mid-stream with
// frames in flight lost on the way (the proxy's hole), and another
// server process starts on the same journal. The client's connection
// resumes on it: the lost frames are replayed exactly once, then the
// stream, whose handler died, ends with "server restarted"; the same
// connection then serves new requests. A second, idle client resumes
// too. Without the journal (a memory store) the RESUME is rejected.
func TestResumeAcrossServerRestart(t *testing.T) {
	dir := t.TempDir()
	s1 := startJournalServer(t, dir, Config{})
	p := faultproxy.New(t, s1.addr)
	ctx := context.Background()
	url := "tcp://" + p.Addr()
	c, idle := dialResume(t, url), dialResume(t, url)
	if _, err := idle.RequestResponse(ctx, rsocket.Payload{Data: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	const items = 200_000
	s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte(strconv.Itoa(items))}, 256)
	if err != nil {
		t.Fatal(err)
	}
	r := resumetest.Ordered{Next: itemsOf(s)}
	within(t, "the first items", func() { err = r.Read(1000) })
	if err != nil {
		t.Fatal(err)
	}
	// The crash: what the server sends from now on is lost on the way
	// (here: the answer to a request), then the process is gone.
	p.Hole(true)
	answered := make(chan error, 1)
	go func() {
		resp, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("lost in flight")})
		if err == nil && string(resp.Data) != "lost in flight" {
			err = errors.New("wrong answer " + string(resp.Data))
		}
		answered <- err
	}()
	within(t, "the answer lost in the hole", func() {
		for p.Holed() == 0 {
			time.Sleep(time.Millisecond)
		}
	})
	s1.stop()
	p.CutAll()
	p.Hole(false)
	holed := p.Holed()

	s2 := startJournalServer(t, dir, Config{})
	if st := s2.store.Stats(); st.Dormant != 2 || st.Loaded != 2 {
		t.Fatalf("the restarted server read %+v from the journal, want 2 sessions", st)
	}
	p.SetUpstream(s2.addr)
	var end error
	within(t, "the stream after the restart", func() { end = r.Read(items) })
	if end == nil || !strings.Contains(end.Error(), "server restarted") {
		t.Fatalf("the stream ended with %v after %d items; want the orphaned stream ended with \"server restarted\"", end, r.Got)
	}
	within(t, "the answer lost in flight", func() { err = <-answered })
	if err != nil {
		t.Fatalf("the answer lost in flight at the crash, replayed from the journal: %v", err)
	}
	t.Logf("%d stream items in order, then \"server restarted\"; %d bytes lost in flight at the crash, replayed from the journal", r.Got, holed)
	for _, cl := range []*rsocket.Conn{c, idle} {
		var resp rsocket.Payload
		within(t, "a request after the restart", func() { resp, err = cl.RequestResponse(ctx, rsocket.Payload{Data: []byte("again")}) })
		if err != nil || string(resp.Data) != "again" {
			t.Fatalf("request after the restart: %q, %v", resp.Data, err)
		}
		if st := cl.ResumeStats(); st.Resumed != 1 {
			t.Fatalf("resume stats %+v, want one resume", st)
		}
	}
	if st := s2.store.Stats(); st.Restored != 2 || st.Dormant != 0 || st.Sessions != 2 {
		t.Fatalf("store after the resumes: %+v", st)
	}

	// The same crash with sessions only in memory: the RESUME finds
	// nothing and the session ends.
	mem := resumeServer(t, rsocket.ResumeConfig{})
	p2 := faultproxy.New(t, mem)
	c2 := dialResume(t, "tcp://"+p2.Addr())
	if _, err := c2.RequestResponse(ctx, rsocket.Payload{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	other := resumeServer(t, rsocket.ResumeConfig{})
	p2.SetUpstream(other)
	p2.CutAll()
	within(t, "the rejected resume", func() { <-c2.Done() })
	if !errors.Is(c2.Err(), conn.ErrResumeRejected) {
		t.Fatalf("without the journal: %v, want a rejected resume", c2.Err())
	}
}

// TestResumeJournalCompaction: a long stream through a journal that
// compacts every 256 KiB keeps the directory small, and the session
// still restores after the compactions.
func TestResumeJournalCompaction(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{CompactBytes: 256 << 10, SegmentBytes: 256 << 10}
	s1 := startJournalServer(t, dir, cfg)
	ctx := context.Background()
	c := dialResume(t, "tcp://"+s1.addr)
	const items = 100_000
	st, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte(strconv.Itoa(items))}, 256)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the stream", func() { err = readStream(st, items) })
	if err != nil {
		t.Fatal(err)
	}
	// Compaction runs beside the appends: one the stream's end started may
	// still be writing the new image or removing the old segments (seen
	// once under -race: 68 % of the bytes on disk). Wait for the bound
	// before reading the figures.
	testwait.Until(func() bool { return dirSize(t, dir) <= 2*int64(s1.store.Stats().Bytes)/3 })
	stats := s1.store.Stats()
	size := dirSize(t, dir)
	t.Logf("journal after %d items: %d records, %d bytes written, %d compactions, %d bytes on disk", items, stats.Records, stats.Bytes, stats.Compactions, size)
	if stats.Compactions == 0 {
		t.Fatalf("no compaction: %+v", stats)
	}
	// The directory holds about the session's image (its retained
	// frames) twice, a segment or two beyond, never all that was written.
	if size > 2*int64(stats.Bytes)/3 {
		t.Fatalf("journal holds %d of the %d bytes written", size, stats.Bytes)
	}
	s1.stop()
	s2 := startJournalServer(t, dir, cfg)
	if d := s2.store.Stats().Dormant; d != 1 {
		t.Fatalf("%d sessions after compactions, want 1", d)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestResumeJournalFaults: a second store on the same directory is
// refused with the holder named; a journal whose write fails does not
// stop the live session; a damaged journal is salvaged at open, never
// a panic or a wedge.
func TestResumeJournalFaults(t *testing.T) {
	dir := t.TempDir()
	s1 := startJournalServer(t, dir, Config{})
	if _, err := Open(dir, Config{}); !errors.Is(err, dirlock.ErrBusy) {
		t.Fatalf("second store on one directory: %v, want ErrBusy", err)
	}
	ctx := context.Background()
	c, err := rsocket.Dial(ctx, "tcp://"+s1.addr, rsocket.WithByteCredits(64<<10), rsocket.WithResume(rsocket.ResumeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 50 {
		if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("payload " + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// A journal that cannot be written (here: its log closed under it,
	// as after an I/O error) costs durability, not the session.
	_ = s1.store.log.Close()
	for i := range 10 {
		if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("after " + strconv.Itoa(i))}); err != nil {
			t.Fatalf("request with the journal failing: %v", err)
		}
	}
	if f := s1.store.Stats().Failures; f == 0 {
		t.Fatal("no journal write failure counted")
	}
	s1.stop()

	// Damage a byte in the middle of the segment: the store opens, says
	// it repaired, and holds whatever sessions are intact.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no journal segment")
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir, Config{})
	if err != nil {
		t.Fatalf("damaged journal: %v", err)
	}
	st := s2.Stats()
	t.Logf("after the damage: %+v", st)
	if !st.Repaired && st.Skipped == 0 {
		t.Fatalf("damage neither repaired nor counted: %+v", st)
	}
	_ = s2.Close()

	// A restarted server whose client comes back after the session
	// lifetime: the RESUME is rejected, the session forgotten.
	dir = t.TempDir()
	s3 := startJournalServer(t, dir, Config{})
	p := faultproxy.New(t, s3.addr)
	c3 := dialResume(t, "tcp://"+p.Addr())
	if _, err := c3.RequestResponse(ctx, rsocket.Payload{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	s3.stop()
	s4 := startJournalServer(t, dir, Config{SessionLifetime: time.Nanosecond})
	p.SetUpstream(s4.addr)
	p.CutAll()
	within(t, "the expired session's resume", func() { <-c3.Done() })
	if !errors.Is(c3.Err(), conn.ErrResumeRejected) {
		t.Fatalf("resume after the session lifetime: %v, want rejected", c3.Err())
	}
	if st := s4.store.Stats(); st.Expired != 1 || st.Restored != 0 {
		t.Fatalf("store: %+v, want the session expired", st)
	}
}

// FuzzJournalRecord: any bytes parse to a record or an error, never a
// panic; a record that parses encodes back to the same bytes; applying
// it to an image (as Open does) ends in an error or an image that
// conn.Restore takes or refuses, never a panic.
func FuzzJournalRecord(f *testing.F) {
	img := journalRecord{kind: recordImage, token: []byte("tok"), seq: 1, peer: "id", keepalive: time.Second,
		maxLifetime: time.Minute, sent: 10, recv: 5, retStart: 0, nextID: 2, hasStreams: true,
		streams: []conn.ImageStream{{ID: 1, Kind: conn.RequestStream}}, tailStart: 0}
	frames := []byte{0, 0, 10, 0, 0, 0, 1, 0x28, 0x20, 'a', 'b', 'c', 'd'}
	f.Add(append(appendJournalHead(nil, &img), frames...))
	delta := journalRecord{kind: recordDelta, token: []byte("tok"), seq: 2, sent: 20, recv: 5, retStart: 10, nextID: 2, tailStart: 10}
	f.Add(append(appendJournalHead(nil, &delta), frames...))
	f.Add(appendJournalHead(nil, &journalRecord{kind: recordEnd, token: []byte("tok"), seq: 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseJournalRecord(b)
		if err != nil {
			return
		}
		if again := append(appendJournalHead(nil, &r), r.tail...); string(again) != string(b) {
			t.Fatalf("record does not encode back: %x → %x", b, again)
		}
		base := img.image()
		base.Retained = append([]byte(nil), frames[:10+3]...)
		base.SentPos = 10
		if r.kind == recordDelta && applyDelta(&base, &r, 1) == nil {
			_, _ = conn.Restore(conn.Config{Role: conn.Server, Resume: true}, base, 0)
		}
		if r.kind == recordImage {
			_, _ = conn.Restore(conn.Config{Role: conn.Server, Resume: true}, r.image(), 0)
		}
	})
}

// BenchmarkResumeJournal: what the journal costs a resumable server:
// 128 request-responses in flight and a request-stream of 64-byte
// payloads on one resumable connection, sessions in memory (store=memory)
// or journaled (sync=none: a write per output batch; sync=always: and an
// fdatasync).
func BenchmarkResumeJournal(b *testing.B) {
	for _, store := range []string{"memory", "journal/sync=none", "journal/sync=always"} {
		for _, model := range []string{"rr128", "stream"} {
			b.Run("store="+store+"/"+model, func(b *testing.B) {
				cfg := rsocket.ResumeConfig{}
				if store != "memory" {
					sync := seglog.SyncNone()
					if store == "journal/sync=always" {
						sync = seglog.SyncAlways()
					}
					st, err := Open(b.TempDir(), Config{Sync: sync})
					if err != nil {
						b.Fatal(err)
					}
					defer st.Close()
					cfg.Store = st
					// How many answers or payloads one record covers: a
					// record per output batch, so this is the batch size.
					defer func() {
						if n := st.Stats().Records; n > 0 {
							b.ReportMetric(float64(b.N)/float64(n), "ops/record")
						}
					}()
				}
				ctx, cancel := context.WithCancel(context.Background())
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					var r rsocket.Responder = streamer{elem: make([]byte, 64)}
					if model == "rr128" {
						r = rrEcho{}
					}
					_ = rsocket.Serve(ctx, ln, r, rsocket.WithResume(cfg))
				}()
				defer func() { cancel(); <-done }()
				c, err := rsocket.Dial(ctx, "tcp://"+ln.Addr().String(), rsocket.WithResume(rsocket.ResumeConfig{}))
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				if model == "stream" {
					s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte(strconv.Itoa(b.N))}, 256)
					if err != nil {
						b.Fatal(err)
					}
					for range b.N {
						if _, err := s.Next(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "payloads/s")
					return
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				p := rsocket.Payload{Data: make([]byte, 64)}
				for range 128 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, err := c.RequestResponse(ctx, p); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			})
		}
	}
}

// TestResumeJournalRestoreInProgress: while one connection restores a
// session from the journal, another RESUME for it is closed without an
// answer (not rejected, which would end the session); the client
// redials and resumes once the session is live. A SETUP reusing the
// token meanwhile is refused.
func TestResumeJournalRestoreInProgress(t *testing.T) {
	dir := t.TempDir()
	s1 := startJournalServer(t, dir, Config{})
	p := faultproxy.New(t, s1.addr)
	token := []byte("restore-in-progress")
	ctx := context.Background()
	c, err := rsocket.Dial(ctx, "tcp://"+p.Addr(), rsocket.WithResume(rsocket.ResumeConfig{Token: token, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p.Refuse(true)
	s1.stop()
	p.CloseAll()
	s2 := startJournalServer(t, dir, Config{})
	// Another connection is restoring it (held here by the test).
	if live, d, busy := s2.store.ResumeTarget(token); live != nil || d == nil || busy {
		t.Fatalf("resumeTarget: live %v, dormant %v, busy %v", live != nil, d != nil, busy)
	}
	if _, _, busy := s2.store.ResumeTarget(token); !busy {
		t.Fatal("a second resumeTarget during the restore is not busy")
	}
	if err := s2.store.Add(token, &rsocket.Conn{}); !errors.Is(err, rsocket.ErrResumeTokenInUse) {
		t.Fatalf("SETUP with the token of a session being restored: %v", err)
	}
	accepted := p.Accepted()
	p.SetUpstream(s2.addr)
	p.Refuse(false)
	within(t, "redials closed without an answer", func() {
		for p.Accepted() < accepted+3 {
			select {
			case <-c.Done():
				return // checked below
			case <-time.After(time.Millisecond):
			}
		}
	})
	select {
	case <-c.Done():
		t.Fatalf("the session ended while another connection restored it: %v", c.Err())
	default:
	}
	s2.store.Release(token) // that restore gave up: the client's next RESUME restores it
	var r rsocket.Payload
	within(t, "the request after the restore", func() { r, err = c.RequestResponse(ctx, rsocket.Payload{Data: []byte("after")}) })
	if err != nil || string(r.Data) != "after" || c.ResumeStats().Resumed != 1 {
		t.Fatalf("after the restore: %q %v, %+v", r.Data, err, c.ResumeStats())
	}
}

// TestResumeJournalByteCreditsNotRestorable: a session that uses the
// byte-credits extension cannot be rebuilt from an image (its credit
// state is not in one): it works as a resumable session in memory, is
// ended in the journal, and a restarted server does not hold it.
func TestResumeJournalByteCreditsNotRestorable(t *testing.T) {
	dir := t.TempDir()
	s1 := startJournalServerOn(t, "tcp", dir, Config{}, rsocket.ResumeConfig{}, rsocket.WithByteCredits(64<<10))
	ctx := context.Background()
	c, err := rsocket.Dial(ctx, "tcp://"+s1.addr, rsocket.WithByteCredits(64<<10), rsocket.WithResume(rsocket.ResumeConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("1000")}, 256)
	if err == nil {
		err = readStream(st, 1000)
	}
	if err != nil {
		t.Fatal(err)
	}
	s1.stop()
	s2 := startJournalServer(t, dir, Config{})
	if st := s2.store.Stats(); st.Dormant != 0 {
		t.Fatalf("a byte-credits session read back from the journal: %+v", st)
	}
}

// TestResumeJournalLargeImage: a session that retains 40 MiB (its
// BufferBytes raised to 64 MiB, no KEEPALIVE yet to trim it) is
// rewritten by compaction as one image of that size, beyond seglog's
// default 32 MiB record limit, and restores from it after a restart.
// With the default limit every compaction failed (the journal would
// grow without bound): Failures counted, no compaction done.
func TestResumeJournalLargeImage(t *testing.T) {
	dir := t.TempDir()
	rcfg := rsocket.ResumeConfig{BufferBytes: 64 << 20}
	cfg := Config{CompactBytes: 1 << 20, SegmentBytes: 1 << 20}
	s := startJournalServerOn(t, "tcp", dir, cfg, rcfg)
	p := faultproxy.New(t, s.addr)
	c := dialResume(t, "tcp://"+p.Addr())
	ctx := context.Background()
	big := rsocket.Payload{Data: make([]byte, 1<<20)}
	for i := range 40 {
		if r, err := c.RequestResponse(ctx, big); err != nil || len(r.Data) != len(big.Data) {
			t.Fatalf("request %d: %d bytes, %v", i, len(r.Data), err)
		}
	}
	// Compactions ran while the session retained up to 40 MiB; wait for
	// the one in progress.
	within(t, "the compactions", func() {
		for st := s.store.Stats(); st.Compactions == 0 || s.store.compacting.Load(); st = s.store.Stats() {
			if st.Failures > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	if st := s.store.Stats(); st.Failures != 0 || st.Compactions == 0 {
		t.Fatalf("compacting a session retaining 40 MiB: %+v", st)
	}
	p.Refuse(true)
	s.stop()
	p.CloseAll()
	s = startJournalServerOn(t, "tcp", dir, cfg, rcfg)
	p.SetUpstream(s.addr)
	p.Refuse(false)
	var err error
	within(t, "a request after the restart", func() { _, err = c.RequestResponse(ctx, rsocket.Payload{Data: []byte("after")}) })
	if err != nil || s.store.Stats().Restored != 1 {
		t.Fatalf("after the restart: %v, store %+v", err, s.store.Stats())
	}
}

// TestResumeJournalSyncPolicy: the journal syncs as configured: the zero
// value (seglog's SyncAlways) fdatasyncs its records, SyncNone never
// does. (SyncAlways is seglog's zero value: a default that replaced the
// zero value by SyncNone made "always" mean "none".)
func TestResumeJournalSyncPolicy(t *testing.T) {
	for _, c := range []struct {
		name string
		sync seglog.SyncPolicy
	}{{"zero value", seglog.SyncPolicy{}}, {"always", seglog.SyncAlways()}, {"none", seglog.SyncNone()}} {
		s := startJournalServer(t, t.TempDir(), Config{Sync: c.sync})
		cl := dialResume(t, "tcp://"+s.addr)
		for range 20 {
			if _, err := cl.RequestResponse(context.Background(), rsocket.Payload{Data: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		st := s.store.Stats()
		if st.Records == 0 || (c.name == "none") != (st.Syncs == 0) {
			t.Errorf("%s: %d records, %d syncs", c.name, st.Records, st.Syncs)
		}
	}
}

// TestResumeJournalRealDiskFull fills the filesystem under a journal (a
// tmpfs, so it needs root; skipped otherwise) while a resumable session
// streams. The live session never notices: the stream completes, in
// order, and the failures are counted. Then two restarts:
//   - with the journal still behind what the client received, the
//     client's RESUME is rejected cleanly (never a gap, never a replay
//     of the wrong frames);
//   - once space is back, the next record is an image that catches the
//     journal up, and after a crash the session resumes and serves.
func TestResumeJournalRealDiskFull(t *testing.T) {
	mnt := testtmpfs.Mount(t, "2m")
	ctx := context.Background()
	cfg := Config{SegmentBytes: 64 << 10, Sync: seglog.SyncNone()}
	// fill leaves about free bytes on the tmpfs.
	filler := filepath.Join(mnt, "filler")
	fill := func(free int64) {
		t.Helper()
		var st syscall.Statfs_t
		if err := syscall.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		avail := int64(st.Bavail) * st.Bsize
		f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(make([]byte, max(avail-free, 0))); err != nil {
			t.Fatal(err)
		}
	}
	// stream runs a 50,000-item stream (about 700 KB of frames) to its
	// end on c.
	stream := func(c *rsocket.Conn) {
		t.Helper()
		s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("50000")}, 256)
		if err != nil {
			t.Fatal(err)
		}
		within(t, "the stream with the disk full", func() { err = readStream(s, 50_000) })
		if err != nil {
			t.Fatalf("the live session broke when its journal could not be written: %v", err)
		}
	}

	// A journal behind the client after the crash: rejected cleanly.
	dir := filepath.Join(mnt, "behind")
	s1 := startJournalServer(t, dir, cfg)
	p := faultproxy.New(t, s1.addr)
	c := dialResume(t, "tcp://"+p.Addr())
	if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	fill(16 << 10)
	stream(c)
	st := s1.store.Stats()
	if st.Failures == 0 {
		t.Fatalf("the disk filled and no journal write failed: %+v", st)
	}
	t.Logf("disk full: %+v", st)
	s1.stop()
	_ = os.Remove(filler)
	s2 := startJournalServer(t, dir, cfg)
	p.SetUpstream(s2.addr)
	p.CutAll()
	within(t, "the resume of a session the journal is behind on", func() { <-c.Done() })
	if !errors.Is(c.Err(), conn.ErrResumeRejected) {
		t.Fatalf("resume with the journal behind: %v, want a rejected resume", c.Err())
	}
	s2.stop()
	_ = os.RemoveAll(dir)

	// Space comes back before the crash: the session catches up and
	// resumes after it.
	dir = filepath.Join(mnt, "healed")
	s3 := startJournalServer(t, dir, cfg)
	p = faultproxy.New(t, s3.addr)
	c = dialResume(t, "tcp://"+p.Addr())
	fill(16 << 10)
	stream(c)
	failed := s3.store.Stats().Failures
	if failed == 0 {
		t.Fatal("the disk filled and no journal write failed")
	}
	_ = os.Remove(filler)
	// The image is retried a second after the last failure; requests
	// give it batches to ride on.
	within(t, "a journal record once space is back", func() {
		for recs := s3.store.Stats().Records; s3.store.Stats().Records == recs; {
			if _, err := c.RequestResponse(ctx, rsocket.Payload{Data: []byte("again")}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	s3.stop()
	s4 := startJournalServer(t, dir, cfg)
	p.SetUpstream(s4.addr)
	p.CutAll()
	var resp rsocket.Payload
	var err error
	within(t, "a request after the restart", func() { resp, err = c.RequestResponse(ctx, rsocket.Payload{Data: []byte("after")}) })
	if err != nil || string(resp.Data) != "after" {
		t.Fatalf("request after space came back and the server restarted: %q, %v", resp.Data, err)
	}
	if st := s4.store.Stats(); st.Restored != 1 {
		t.Fatalf("store after the restart: %+v, want the session restored", st)
	}
}

// TestImageOwnsItsBytes: the image of a parsed record shares nothing
// with the buffer it was parsed from, which the journal's reader reuses
// for the records after it. Before, the token was shared: a session
// whose image was followed by enough records had its token overwritten
// at Open, the restore failed ("resume token in use") and the client,
// whose RESUME had been taken, waited for ever.
func TestImageOwnsItsBytes(t *testing.T) {
	token := []byte("0123456789abcdef")
	r := journalRecord{kind: recordImage, token: token, seq: 1, peer: "p", sent: 10, recv: 20, tailStart: 10, tail: []byte("frames")}
	b := append(appendJournalHead(nil, &r), r.tail...)
	parsed, err := parseJournalRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	img := parsed.image()
	clear(b) // the reader's buffer, reused
	if string(img.Token) != string(token) || string(img.Retained) != "frames" {
		t.Fatalf("image after its buffer was reused: token %q, retained %q; want %q, %q", img.Token, img.Retained, token, "frames")
	}
}
