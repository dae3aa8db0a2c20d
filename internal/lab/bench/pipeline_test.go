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
