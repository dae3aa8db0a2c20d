package main

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
)

// TestAgentStallTimeoutFlag: the agent's --stall-timeout (its collectors'
// stall rule) has the sink's default, reaches the agent's Config, and 0
// is an error naming it.
func TestAgentStallTimeoutFlag(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{{nil, defaults.StallTimeout}, {[]string{"--stall-timeout", "90s"}, 90 * time.Second}} {
		fs, c := newAgentFlags(io.Discard)
		args := append([]string{"--sink", "127.0.0.1:1", "--spool", t.TempDir()}, tc.args...)
		if err := parseDaemonFlags(fs, args, &c.configFile, defaults.Agent); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := c.config(log)
		if err != nil || cfg.StallTimeout != tc.want {
			t.Errorf("%v: StallTimeout %v (%v), want %v", tc.args, cfg.StallTimeout, err, tc.want)
		}
	}
	err := runAgent([]string{"--sink", "127.0.0.1:1", "--spool", t.TempDir(), "--stall-timeout", "0s"}, io.Discard, io.Discard)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "--stall-timeout") {
		t.Errorf("--stall-timeout 0s: %v, want exit 2 naming it", err)
	}
}
