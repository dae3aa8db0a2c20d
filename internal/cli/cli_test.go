package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestUnprefixed(t *testing.T) {
	for _, c := range []struct{ name, msg, want string }{
		{"sink", "sink: mkdir x: not a directory", "mkdir x: not a directory"},
		{"agent", "agent: spool x is damaged", "spool x is damaged"},
		{"log check", "log: no log in x", "no log in x"},
		{"xfer send", "xfer: send: refused", "refused"},
		{"sink", "sinking: x", "sinking: x"},
	} {
		if got := unprefixed(c.name, c.msg); got != c.want {
			t.Errorf("unprefixed(%q, %q) = %q, want %q", c.name, c.msg, got, c.want)
		}
	}
}

// TestCommandListAligned: the summaries of the command list start in one
// column however long the longest name (before: a fixed 16 columns, and
// "bench remote-write" and "dead-letter clear" ran into their summaries).
func TestCommandListAligned(t *testing.T) {
	app := &App{Name: "x"}
	nop := func([]string, io.Writer, io.Writer) error { return nil }
	for _, n := range []string{"a", "dead-letter clear", "bench remote-write"} {
		app.Register(n, "summary of "+n, nop)
	}
	var b strings.Builder
	app.listCommands(&b, app.Names())
	col := -1
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		i := strings.Index(line, "summary of ")
		if i < 0 || (col >= 0 && i != col) {
			t.Fatalf("summary not aligned in %q:\n%s", line, b.String())
		}
		col = i
		if name := strings.TrimSpace(line[:i]); !strings.HasSuffix(line[:i], "  ") || name == "" {
			t.Fatalf("name and summary not two spaces apart: %q", line)
		}
	}
}

// TestInterruptedExits130: a command a signal ended (its error is
// context.Canceled, as from signal.NotifyContext) exits 130 with no
// message. Before, Ctrl-C of `sluice rsocket stream` printed "context
// canceled" and exited 1, as a failure does.
func TestInterruptedExits130(t *testing.T) {
	app := &App{Name: "x"}
	app.Register("stream", "s", func([]string, io.Writer, io.Writer) error {
		return fmt.Errorf("reading: %w", context.Canceled)
	})
	var out, errOut strings.Builder
	if code := app.Main([]string{"stream"}, &out, &errOut); code != ExitInterrupted || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want %d and nothing", code, errOut.String(), ExitInterrupted)
	}
}
