package logutil

import (
	"bytes"
	"strings"
	"testing"
)

// Every daemon's logger writes a repeated line once (the rest are
// summarized when the window ends).
func TestNewLoggerSuppressesRepeats(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, "info")
	for range 65 {
		log.Error("ingest failed", "err", "spool quota reached")
	}
	log.Debug("below the level")
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("65 identical lines wrote %d lines:\n%s", n, buf.String())
	}
}
