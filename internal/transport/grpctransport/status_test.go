package grpctransport

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/protocol"
)

// TestAbortedMapping (issue 23): a session replaced by a newer one of its
// agent id ends with gRPC Aborted, which reads back as StatusAborted
// (before, Aborted read back as Unavailable).
func TestAbortedMapping(t *testing.T) {
	err := StatusError(protocol.Errorf(protocol.StatusAborted, "replaced by a newer session of agent %q", "a"))
	if status.Code(err) != codes.Aborted {
		t.Fatalf("StatusError: %v, want Aborted", err)
	}
	back := SessionError(err)
	if protocol.StatusOf(back) != protocol.StatusAborted || protocol.IsRetryable(back) {
		t.Fatalf("SessionError: %v (status %v), want Aborted, not retryable", back, protocol.StatusOf(back))
	}
}
