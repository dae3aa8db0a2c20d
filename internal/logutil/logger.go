package logutil

import (
	"io"
	"log/slog"
)

// NewLogger logs structured text lines to w. A line repeated within
// DefaultWindow (same level, message and attributes) is written
// once, then summarized as "MESSAGE repeated N times": a daemon failing
// in a loop must not flood its log.
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(Dedup(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}), Options{}))
}
