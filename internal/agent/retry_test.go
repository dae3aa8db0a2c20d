package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/seglog"
)

// TestRetryRightAfterAnswerIsDuplicate: a producer whose answer was lost
// retries at once; the retry must be recognised as a duplicate. The agent
// used to answer a request before recording its completion, so a retry
// arriving in between spooled the request's last message again (found by
// TestChaosResetsAndKills: single records stored twice).
func TestRetryRightAfterAnswerIsDuplicate(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) {
		// The linger timer seals each message (the race shows on that
		// path); a short one keeps the loop fast.
		c.SpoolSync, c.Linger = seglog.SyncNone(), time.Millisecond
	})
	defer a.Close()
	ctx := context.Background()
	for seq := uint64(1); seq <= 3000; seq++ {
		recs := [][]byte{[]byte(fmt.Sprintf("request %d", seq))}
		if dup, err := a.IngestFrom(ctx, "p", seq, recs); err != nil || dup {
			t.Fatalf("request %d: duplicate=%v err=%v", seq, dup, err)
		}
		if dup, err := a.IngestFrom(ctx, "p", seq, recs); err != nil || !dup {
			t.Fatalf("retry of request %d right after its answer: duplicate=%v err=%v, want a duplicate", seq, dup, err)
		}
	}
}
