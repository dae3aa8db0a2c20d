package driver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/delivery"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/seglog"
)

// setAsideRig is a driver over a spool with a quota and small segments,
// and a sink that refuses message 0 for good and takes everything else.
type setAsideRig struct {
	dir string
	sp  *spool.Spool
	m   *metrics.Metrics
	d   *Driver
	svc *sink
}

func newSetAsideRig(t *testing.T, quota int64) *setAsideRig {
	return newSetAsideRigLog(t, quota, quiet, func(id uint64) bool { return id == 0 })
}

func newSetAsideRigLog(t *testing.T, quota int64, log *slog.Logger, refuse func(uint64) bool) *setAsideRig {
	t.Helper()
	svc := newSink()
	svc.refuse = func(_ int, id uint64) bool { return refuse(id) }
	return newSetAsideRigSvc(t, quota, log, svc)
}

// newSetAsideRigSvc is the rig over svc, set up by the caller.
// A quota of -1 is 256 KiB with the spool Pressed from its first byte.
func newSetAsideRigSvc(t *testing.T, quota int64, log *slog.Logger, svc *sink) *setAsideRig {
	t.Helper()
	dir := t.TempDir()
	pressedAt := int64(0)
	if quota == -1 {
		quota, pressedAt = 256<<10, 1
	}
	sp, err := spool.Open(dir, quota, "", quiet, seglog.WithSync(seglog.SyncNone()), seglog.WithSegmentBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	sp.SetPressedAt(pressedAt) // before the driver starts reading it
	s, err := delivery.NewSender(delivery.SenderConfig{ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := memConfig(svc, sinceStart())
	cfg.Logger = log
	d := Start(ctx, cfg, s, sp, m, nil)
	t.Cleanup(func() {
		cancel()
		<-d.Done()
		sp.Close()
	})
	return &setAsideRig{dir: dir, sp: sp, m: m, d: d, svc: svc}
}

// spoolN appends n messages of about 1 KiB and announces them, as the
// spool writer would.
func (r *setAsideRig) spoolN(t *testing.T, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		in := appendPlain(t, r.sp, fmt.Sprintf("message-%d-%s", i, strings.Repeat("x", 1000)))
		r.sp.Settle(0, in.Size) // as ingest counts what it spooled
		r.d.Spooled([]spool.Spooled{in})
	}
}

// TestParkedMessageSetAsideUnderPressure: a message the sink refuses for
// good is parked and holds the watermark, so every spool segment after it
// stays on disk though the sink acknowledged all of it. Once the spool
// reaches half its quota the driver copies the parked message to the
// dead-letter log, durably, and settles it (delivery.SetAside): the
// watermark passes it and the acknowledged segments are freed. Before,
// the spool filled to its quota and ingest answered 507 until an
// operator intervened.
func TestParkedMessageSetAsideUnderPressure(t *testing.T) {
	const quota = 256 << 10
	r := newSetAsideRig(t, quota)
	r.spoolN(t, 0, 200) // ~200 KiB: past half the quota
	testwait.For(t, "the refused message set aside and the watermark past everything", func() bool {
		// The gauges are published after the step that moved the watermark.
		return r.sp.AckedWatermark() >= 200 && r.m.Snapshot(false).Parked == 0
	})
	if v := counterValue(r.m.DeadLetters); v != 1 {
		t.Errorf("dead_letters_total = %v, want 1", v)
	}
	if p := r.m.Snapshot(false).Parked; p != 0 {
		t.Errorf("%d messages still parked", p)
	}
	testwait.For(t, "the acknowledged segments freed", func() bool { return r.sp.Size() < quota/4 })

	// The letter holds the message as spooled, and why it was refused.
	var letters []deadletter.Letter
	err := deadletter.Read(filepath.Join(r.dir, deadletter.Dir), func(l deadletter.Letter) error {
		letters = append(letters, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 {
		t.Fatalf("%d dead letters, want 1", len(letters))
	}
	l := letters[0]
	if l.ID != 0 || l.Code != "ERROR_CODE_OVERSIZE" || !strings.Contains(l.Detail, "too large for the store") {
		t.Errorf("letter %d %q %q, want message 0, ERROR_CODE_OVERSIZE and the sink's detail", l.ID, l.Code, l.Detail)
	}
	m, err := spool.Decode(l.Record)
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	if err := spool.Records(m, r.sp.ID(), l.ID, nil, func(rec []byte) error {
		recs = append(recs, string(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !strings.HasPrefix(recs[0], "message-0-") {
		t.Errorf("the letter's records: %.40q, want message-0-…", recs)
	}
	// Every other message reached the sink; none was set aside.
	for id := uint64(1); id < 200; id++ {
		if _, ok := r.svc.sentAs(id); !ok {
			t.Fatalf("message %d never sent", id)
		}
	}
}

// TestParkedMessageKeptWithoutPressure: far from its quota, the spool
// keeps a refused message parked for the next session (a sink fixed
// meanwhile takes it), and writes no dead letter.
func TestParkedMessageKeptWithoutPressure(t *testing.T) {
	r := newSetAsideRig(t, 64<<20)
	r.spoolN(t, 0, 20)
	testwait.For(t, "the 19 good messages acknowledged and message 0 parked", func() bool {
		s := r.m.Snapshot(false)
		return s.AckedMessages >= 19 && s.Parked == 1
	})
	// persist runs every 100 ms; the test does not wait on the clock: it
	// runs the loop's own check under its lock, as the ticker would.
	r.d.mu.Lock()
	r.d.loop.persist()
	r.d.mu.Unlock()
	if w := r.sp.AckedWatermark(); w != 0 {
		t.Errorf("watermark %d: the parked message 0 must keep it", w)
	}
	if v := counterValue(r.m.DeadLetters); v != 0 {
		t.Errorf("dead_letters_total = %v without pressure", v)
	}
	if _, err := os.Stat(filepath.Join(r.dir, deadletter.Dir)); !os.IsNotExist(err) {
		t.Errorf("dead-letter directory exists without pressure (%v)", err)
	}
}

func counterValue(c interface{ Write(*dto.Metric) error }) float64 {
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		return -1
	}
	return out.GetCounter().GetValue()
}

// TestSetAsideLogIsRateLimited: a sink that refuses many messages for good
// gets them all set aside under pressure, with one ERROR line that counts
// them, not one per message.
func TestSetAsideLogIsRateLimited(t *testing.T) {
	var logBuf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelError}))
	// Pressed from the first byte (quota -1): by size alone,
	// acknowledgements could shrink the spool below half its quota
	// before the refusals came, and a parked message is then kept for the
	// next session instead (TestParkedMessageKeptWithoutPressure), which
	// this test would wait for in vain (seen once in a loaded run).
	r := newSetAsideRigLog(t, -1, log, func(id uint64) bool { return id%10 == 0 })
	r.spoolN(t, 0, 200)
	testwait.For(t, "the 20 refused messages set aside", func() bool {
		return counterValue(r.m.DeadLetters) == 20 && r.sp.AckedWatermark() >= 200
	})
	out := logBuf.String()
	if lines := strings.Count(out, "set aside in the dead-letter log"); lines != 1 {
		t.Errorf("%d set-aside ERROR lines for 20 messages, want 1:\n%s", lines, out)
	}
	// The line counts the bytes of every letter it reports, not the last
	// one's (before: "bytes" was the newest letter's size, and 0 when the
	// log already held it).
	if m := regexp.MustCompile(`messages=(\d+) .* bytes=(\d+)`).FindStringSubmatch(out); m == nil {
		t.Errorf("no messages= and bytes= in the ERROR line:\n%s", out)
	} else if n, _ := strconv.Atoi(m[1]); n > 0 {
		if b, _ := strconv.Atoi(m[2]); b < n*1000 {
			t.Errorf("the line reports %d messages in %d bytes, want at least 1000 each:\n%s", n, b, out)
		}
	}
	letters := map[uint64]int{}
	if err := deadletter.Read(filepath.Join(r.dir, deadletter.Dir), func(l deadletter.Letter) error {
		letters[l.ID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for id := uint64(0); id < 200; id += 10 {
		if letters[id] != 1 {
			t.Errorf("message %d has %d letters, want 1", id, letters[id])
		}
	}
}

// TestRefusedOnceAcrossSessions: a message the sink refuses for good is
// counted in rejected_messages_total once, however many sessions re-offer
// it, and the refusals are logged at most once a minute. Before, a line
// and a count per re-offer: the count doubled at each sink restart (found
// by hand, 2026-11-29: 329 parked messages, 658 after one restart).
func TestRefusedOnceAcrossSessions(t *testing.T) {
	var logBuf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := newSink()
	svc.refuse = func(_ int, id uint64) bool { return id%10 == 0 }
	// Session 1 ends after the last message: the next re-offers the
	// parked ones.
	svc.endAfter = func(session int, id uint64) bool { return session == 1 && id == 49 }
	r := newSetAsideRigSvc(t, 1<<30, log, svc) // no pressure: they stay parked
	r.spoolN(t, 0, 50)
	testwait.For(t, "two sessions, the parked messages offered in each", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.sessions >= 2 && svc.copies[0] >= 2 && svc.copies[40] >= 2
	})
	if v := rejected(r.m, "ERROR_CODE_OVERSIZE"); v != 5 {
		t.Errorf("rejected_messages_total = %v for 5 messages each refused in 2 sessions, want 5", v)
	}
	if n := strings.Count(logBuf.String(), "sink refused a message"); n != 1 {
		t.Errorf("%d refusal lines within a minute, want 1:\n%s", n, logBuf.String())
	}
}
