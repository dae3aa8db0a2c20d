package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A run in which no Ingest call completes (here: a duration too short for
// any) fails at once with a reason, instead of waiting out Drain for a
// spooled message that never comes and then reporting "not drained".
func TestRunPipelineNothingIngested(t *testing.T) {
	src := func(int) Source {
		return func(dst [][]byte) [][]byte { return append(dst, []byte("x")) }
	}
	res, err := RunPipeline(context.Background(), PipelineConfig{Dir: t.TempDir(), Duration: time.Nanosecond,
		NewSource: src, Feeders: 2, Drain: time.Second})
	if err == nil || !strings.Contains(err.Error(), "no Ingest call completed") {
		t.Fatalf("RunPipeline = %+v, %v; want the no-Ingest error", res, err)
	}
}

// The end of the drain is looked for every drainPoll, not at the progress
// ticks: with an Interval longer than the test's bound the run must still
// end, drained. Before, the check after the feeders stopped waited for the
// next tick (by default up to a second added to every run's Elapsed).
func TestRunPipelineDrainDoesNotWaitForTick(t *testing.T) {
	src := func(int) Source {
		return func(dst [][]byte) [][]byte {
			for range 100 {
				dst = append(dst, []byte("a record of the pipeline test"))
			}
			return dst
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The feeders stop after MaxRecords, not after a time that a slow
	// fdatasync on a loaded machine could outlast before the first Ingest.
	res, err := RunPipeline(ctx, PipelineConfig{Dir: t.TempDir(), Duration: time.Minute, MaxRecords: 1000,
		NewSource: src, Feeders: 2, Interval: time.Hour})
	if err != nil || !res.Drained {
		t.Fatalf("RunPipeline = drained %v, %v; want drained without a progress tick", res.Drained, err)
	}
	if res.Agent.AckedRecords == 0 {
		t.Fatal("no record acknowledged")
	}
}
