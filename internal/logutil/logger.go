package logutil

import (
	"fmt"
	"io"
	"log/slog"
)

// CheckLevel says whether level is one NewLogger takes: debug, info,
// warn or error (any case, with an optional offset such as "warn+2").
func CheckLevel(level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return nil
}

// NewLogger logs structured text lines to w. A line repeated within
// DefaultWindow (same level, message and attributes) is written
// once, then summarized as "MESSAGE repeated N times": a daemon failing
// in a loop must not flood its log. A level CheckLevel refuses logs at
// info (commands check their --log-level first).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(Dedup(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}), Options{}))
}
