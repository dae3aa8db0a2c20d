// Package skipper is run by testskip's TestSummaryEndsTheRun: two tests
// skip for missing parts, one passes.
package skipper

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

func TestNeedsKafka(t *testing.T) {
	testskip.Missing(t, "SLUICE_KAFKA", testskip.Kafka, "no Kafka here")
}

func TestNeedsRoot(t *testing.T) {
	testskip.Missing(t, "", testskip.Root, "not root")
}

func TestRuns(t *testing.T) {}
