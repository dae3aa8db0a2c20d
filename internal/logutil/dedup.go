// Package logutil holds log/slog helpers shared by the sluice daemons.
//
// Dedup rate-limits repeated log lines: a daemon that fails the same way
// in a loop (a full disk, an unreachable sink, 64 feeders hitting the same
// quota) writes the line once, then one summary per window, instead of
// flooding its log.
package logutil

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// DefaultWindow is how long Dedup suppresses repeats of a line when
// Options.Window is 0.
const DefaultWindow = 10 * time.Second

// maxKeys bounds the lines Dedup tracks at once; beyond it new lines pass
// through unsuppressed rather than grow memory without bound.
const maxKeys = 4096

// Clock is what Dedup needs of time; tests inject a fake one and advance
// it instead of sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d and returns a
	// function that cancels the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Options configure Dedup.
type Options struct {
	// Window is how long after a line is written its repeats are
	// suppressed. Default DefaultWindow.
	Window time.Duration
	// KeyAttrs names the attributes that, with the level and the message,
	// identify a line. Nil means every attribute (including those added
	// with Logger.With): only exact repeats are suppressed, so no line
	// that differs in any value is ever hidden.
	KeyAttrs []string
	// Clock defaults to the system clock.
	Clock Clock
}

// Dedup returns a handler that passes records to h, except that a record
// with the same level, message and key attributes as one passed less than
// Window ago is counted and dropped. When the window of a line that had
// repeats ends, one record "MESSAGE repeated N times" is passed, with the
// level and attributes of the first one and N the number dropped; the
// next repeat after that is written in full and opens a new window. So a
// line repeating forever costs at most two lines per window.
func Dedup(h slog.Handler, opts Options) *Handler {
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	var keys map[string]bool
	if opts.KeyAttrs != nil {
		keys = make(map[string]bool, len(opts.KeyAttrs))
		for _, k := range opts.KeyAttrs {
			keys[k] = true
		}
	}
	return &Handler{inner: h, s: &state{opts: opts, keyAttrs: keys, lines: make(map[string]*line)}}
}

// Handler is the slog.Handler returned by Dedup.
type Handler struct {
	inner  slog.Handler
	prefix string // key part from WithAttrs and WithGroup
	s      *state // shared by every handler derived with WithAttrs/WithGroup
}

type state struct {
	opts     Options
	keyAttrs map[string]bool // nil: all

	mu        sync.Mutex
	lines     map[string]*line
	lastSweep time.Time
}

// line is a message written within the current window.
type line struct {
	first    slog.Record  // as written, for the summary
	inner    slog.Handler // the handler it was written to
	start    time.Time
	repeats  int
	stopTime func() bool // the pending summary, when repeats > 0
}

func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.prefix)
	for _, a := range as {
		h.s.appendKey(&b, a)
	}
	return &Handler{inner: h.inner.WithAttrs(as), prefix: b.String(), s: h.s}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), prefix: h.prefix + "\x00g:" + name, s: h.s}
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(0)
	b.WriteString(r.Message)
	b.WriteString(h.prefix)
	r.Attrs(func(a slog.Attr) bool {
		h.s.appendKey(&b, a)
		return true
	})
	key := b.String()

	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Clock.Now()
	s.sweepLocked(now)
	if l, ok := s.lines[key]; ok {
		if now.Sub(l.start) < s.opts.Window {
			l.repeats++
			if l.repeats == 1 {
				wait := l.start.Add(s.opts.Window).Sub(now)
				l.stopTime = s.opts.Clock.AfterFunc(wait, func() { s.endWindow(key, l) })
			}
			return nil
		}
		s.summarizeLocked(key, l)
	}
	if len(s.lines) < maxKeys {
		s.lines[key] = &line{first: r.Clone(), inner: h.inner, start: now}
	}
	return h.inner.Handle(ctx, r)
}

// Flush writes the summaries of every line with suppressed repeats now,
// and forgets all lines: the next occurrence of each is written in full.
func (h *Handler) Flush() {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, l := range s.lines {
		s.summarizeLocked(key, l)
	}
}

// endWindow is the timer of a line with repeats.
func (s *state) endWindow(key string, l *line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines[key] == l { // not already summarized by Handle or Flush
		s.summarizeLocked(key, l)
	}
}

// summarizeLocked ends a line's window: it writes the summary if there
// were repeats and forgets the line.
func (s *state) summarizeLocked(key string, l *line) {
	delete(s.lines, key)
	if l.stopTime != nil {
		l.stopTime()
	}
	if l.repeats == 0 {
		return
	}
	r := slog.NewRecord(s.opts.Clock.Now(), l.first.Level, fmt.Sprintf("%s repeated %d times", l.first.Message, l.repeats), l.first.PC)
	l.first.Attrs(func(a slog.Attr) bool {
		r.AddAttrs(a)
		return true
	})
	l.inner.Handle(context.Background(), r)
}

// sweepLocked forgets, once per window, the lines whose window ended
// without repeats (those with repeats have a timer).
func (s *state) sweepLocked(now time.Time) {
	if now.Sub(s.lastSweep) < s.opts.Window {
		return
	}
	s.lastSweep = now
	for key, l := range s.lines {
		if l.repeats == 0 && now.Sub(l.start) >= s.opts.Window {
			delete(s.lines, key)
		}
	}
}

// appendKey adds an attribute to a line's key if it is a key attribute.
func (s *state) appendKey(b *strings.Builder, a slog.Attr) {
	if s.keyAttrs != nil && !s.keyAttrs[a.Key] {
		return
	}
	b.WriteByte(0)
	b.WriteString(a.Key)
	b.WriteByte('=')
	b.WriteString(a.Value.Resolve().String())
}
