package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/seglog"
)

// TestIngestIdempotentImmediateRetry: a retry sent the moment the original
// request was answered is recognised as a duplicate. The spool writer must
// record a request's completion mark before it answers the caller; when it
// answered first, a retry racing the bookkeeping was spooled a second time.
func TestIngestIdempotentImmediateRetry(t *testing.T) {
	// SyncNone keeps each round cheap so the race window is hit often.
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.SpoolSync = seglog.SyncNone(); c.Linger = 1 })
	defer a.Close()
	// Let the answered caller run before the writer goes on, as a busy
	// machine would; with the old order every retry then raced.
	a.ingest.AfterAnswer = func() { time.Sleep(100 * time.Microsecond) }
	ctx := context.Background()
	// Several producers at once: the spool writer then answers groups of
	// requests, which widens the window between answer and bookkeeping.
	const producers, rounds = 2, 60
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		go func() {
			producer := fmt.Sprint("producer-", p)
			for seq := uint64(1); seq <= rounds; seq++ {
				rec := [][]byte{[]byte(fmt.Sprint(producer, "/", seq))}
				if dup, err := a.IngestFrom(ctx, producer, seq, rec); err != nil || dup {
					errs <- fmt.Errorf("%s request %d: duplicate=%v err=%v", producer, seq, dup, err)
					return
				}
				if dup, err := a.IngestFrom(ctx, producer, seq, rec); err != nil || !dup {
					errs <- fmt.Errorf("%s immediate retry of request %d: duplicate=%v err=%v (spooled twice)", producer, seq, dup, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for p := 0; p < producers; p++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := len(spooledRecords(t, a)); got != producers*rounds {
		t.Fatalf("spool holds %d records, want %d", got, producers*rounds)
	}
}
