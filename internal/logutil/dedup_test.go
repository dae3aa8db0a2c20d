package logutil

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock that moves only when the test advances it; due
// AfterFunc callbacks run synchronously in Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t.f)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// newTest returns a logger through Dedup into a buffer, without times.
func newTest(opts Options) (*slog.Logger, *Handler, *fakeClock, *bytes.Buffer) {
	var buf bytes.Buffer
	text := slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}})
	clk := newFakeClock()
	opts.Clock = clk
	h := Dedup(text, opts)
	return slog.New(h), h, clk, &buf
}

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	buf.Reset()
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestDedupRepeats(t *testing.T) {
	log, _, clk, buf := newTest(Options{Window: 10 * time.Second})
	for range 65 {
		log.Error("ingest failed", "err", "spool quota reached")
		clk.Advance(100 * time.Millisecond)
	}
	want := []string{`level=ERROR msg="ingest failed" err="spool quota reached"`}
	if got := lines(buf); !equal(got, want) {
		t.Fatalf("65 identical lines within the window wrote\n%q\nwant\n%q", got, want)
	}
	clk.Advance(10 * time.Second) // the window ends: the summary
	want = []string{`level=ERROR msg="ingest failed repeated 64 times" err="spool quota reached"`}
	if got := lines(buf); !equal(got, want) {
		t.Fatalf("at the window's end got\n%q\nwant\n%q", got, want)
	}
	// The next occurrence is written in full and opens a new window.
	log.Error("ingest failed", "err", "spool quota reached")
	log.Error("ingest failed", "err", "spool quota reached")
	if got := lines(buf); len(got) != 1 || !strings.Contains(got[0], `msg="ingest failed" `) {
		t.Fatalf("after the summary got %q, want the line once", got)
	}
	clk.Advance(10 * time.Second)
	if got := lines(buf); len(got) != 1 || !strings.Contains(got[0], "repeated 1 times") {
		t.Fatalf("second window's summary: %q", got)
	}
	// A line without repeats leaves no summary; after its window it is new.
	log.Warn("once")
	clk.Advance(11 * time.Second)
	log.Warn("once")
	if got := lines(buf); len(got) != 2 || got[0] != got[1] {
		t.Fatalf("a line spaced beyond the window: %q, want it twice", got)
	}
}

func TestDedupKeys(t *testing.T) {
	log, _, _, buf := newTest(Options{})
	log.Error("send failed", "err", "a")
	log.Error("send failed", "err", "b") // another value: another line
	log.Warn("send failed", "err", "a")  // another level
	log.With("component", "sink").Error("send failed", "err", "a")
	log.WithGroup("g").Error("send failed", "err", "a")
	log.Error("send failed", "err", "a") // the only repeat
	if got := lines(buf); len(got) != 5 {
		t.Fatalf("got %d lines, want 5 (only exact repeats suppressed):\n%s", len(got), strings.Join(got, "\n"))
	}

	log, h, _, buf := newTest(Options{KeyAttrs: []string{"err"}})
	for i := range 10 {
		log.Error("send failed", "err", "refused", "attempt", i)
	}
	log.Error("send failed", "err", "reset", "attempt", 10)
	got := lines(buf)
	if len(got) != 2 || !strings.Contains(got[0], "attempt=0") || !strings.Contains(got[1], "err=reset") {
		t.Fatalf("KeyAttrs err: got %q, want the first refused line and the reset line", got)
	}
	h.Flush()
	if got := lines(buf); len(got) != 1 || !strings.Contains(got[0], `msg="send failed repeated 9 times" err=refused attempt=0`) {
		t.Fatalf("Flush: %q", got)
	}
}

// The summary goes to the handler the line was written to, so attributes
// added with With are on it too.
func TestDedupSummaryKeepsContext(t *testing.T) {
	log, _, clk, buf := newTest(Options{Window: time.Second})
	l := log.With("agent", "a1")
	l.Info("reconnecting")
	l.Info("reconnecting")
	clk.Advance(time.Second)
	want := []string{`level=INFO msg=reconnecting agent=a1`, `level=INFO msg="reconnecting repeated 1 times" agent=a1`}
	if got := lines(buf); !equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A repeat after the window has ended, before its timer ran, writes the
// summary first and then itself.
func TestDedupLateTimer(t *testing.T) {
	var buf bytes.Buffer
	clk := &stoppedClock{now: time.Unix(0, 0)}
	h := Dedup(slog.NewTextHandler(&buf, nil), Options{Window: time.Second, Clock: clk})
	log := slog.New(h)
	log.Info("x")
	log.Info("x")
	clk.now = clk.now.Add(2 * time.Second)
	log.Info("x")
	got := lines(&buf)
	if len(got) != 3 || !strings.Contains(got[1], "x repeated 1 times") || !strings.Contains(got[2], "msg=x") {
		t.Fatalf("got %q", got)
	}
}

// stoppedClock never fires its timers.
type stoppedClock struct{ now time.Time }

func (c *stoppedClock) Now() time.Time { return c.now }
func (c *stoppedClock) AfterFunc(time.Duration, func()) (stop func() bool) {
	return func() bool { return true }
}

// Tracking is bounded: distinct lines beyond maxKeys are all written.
func TestDedupBounded(t *testing.T) {
	log, h, _, buf := newTest(Options{})
	for i := range maxKeys + 100 {
		log.Info("line", "i", i)
	}
	if n := len(lines(buf)); n != maxKeys+100 {
		t.Fatalf("%d distinct lines wrote %d", maxKeys+100, n)
	}
	if n := len(h.s.lines); n > maxKeys {
		t.Fatalf("tracking %d lines, want at most %d", n, maxKeys)
	}
}

func TestDedupConcurrent(t *testing.T) {
	log, h, clk, buf := newTest(Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				log.Error("boom", "g", g%2)
			}
		}()
	}
	wg.Wait()
	clk.Advance(DefaultWindow)
	h.Flush()
	got := lines(buf)
	total := 0
	for _, l := range got {
		var n int
		if _, err := fmt.Sscanf(l[strings.Index(l, "repeated")+len("repeated "):], "%d", &n); err == nil && strings.Contains(l, "repeated") {
			total += n
		} else {
			total++
		}
	}
	if len(got) != 4 || total != 800 {
		t.Fatalf("got %d lines accounting for %d records, want 4 lines for 800:\n%s", len(got), total, strings.Join(got, "\n"))
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
