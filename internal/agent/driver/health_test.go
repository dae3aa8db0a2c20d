package driver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
)

// TestClassify: each connection failure gets its code and is permanent
// exactly when retrying cannot help until a person changes something.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err       error
		code      string
		permanent bool
	}{
		{errHandshakeTimeout, "HandshakeTimeout", false},
		{fmt.Errorf("x: %w", errNoProgress), "ProgressTimeout", false},
		{fmt.Errorf("handshake: %w: sink 2, agent 1", errVersionMismatch), "VersionMismatch", true},
		{protocol.Errorf(protocol.StatusPermissionDenied, "agent a claims b"), "PermissionDenied", true},
		{protocol.Errorf(protocol.StatusUnauthenticated, "no token"), "Unauthenticated", true},
		{protocol.Errorf(protocol.StatusInvalid, "bad frame"), "Invalid", true},
		{protocol.Errorf(protocol.StatusUnknown, "unknown service sluice.v1.Sink"), "Unimplemented", true},
		{protocol.Errorf(protocol.StatusUnavailable, "name resolver error: produced zero addresses"), "BadAddress", true},
		{protocol.Errorf(protocol.StatusUnavailable, "connection error: desc = \"transport: authentication handshake failed: tls: bad certificate\""), "TLS", true},
		{protocol.Errorf(protocol.StatusUnavailable, "connection refused"), "Unavailable", false},
		{errors.New("memconn: session closed"), "Unavailable", false},
		{protocol.Errorf(protocol.StatusResourceExhausted, "too many sessions"), "ResourceExhausted", false},
		{protocol.Errorf(protocol.StatusCanceled, "context canceled"), "Canceled", false},
		{protocol.Errorf(protocol.StatusAborted, `replaced by a newer session of agent "a"`), "Aborted", true},
		{protocol.Errorf(protocol.StatusFailedPrecondition, protocol.IDsTakenDetail+` "a": this sink holds message ids up to 4 under it`), "IDsTaken", true},
	} {
		f := classify(tc.err)
		if f.code != tc.code || f.permanent != tc.permanent {
			t.Errorf("classify(%v) = %s permanent=%v, want %s permanent=%v", tc.err, f.code, f.permanent, tc.code, tc.permanent)
		}
		if f.hint == "" {
			t.Errorf("classify(%v): no hint", tc.err)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {262144, "256 KiB"}, {1536, "1.5 KiB"}, {5 << 30, "5 GiB"}} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestClassifyPlainTextToTLS: a sink serving TLS drops an agent speaking
// plain HTTP/2 to it ("error reading server preface: EOF"); the hint says
// to add --tls-ca, not that the sink is down (found by hand). It stays
// retryable: a sink restarting reads the same way.
func TestClassifyPlainTextToTLS(t *testing.T) {
	f := classify(protocol.Errorf(protocol.StatusUnavailable, `connection error: desc = "error reading server preface: EOF"`))
	if f.permanent || !strings.Contains(f.hint, "--tls-ca") {
		t.Fatalf("classify: %+v, want a retryable failure whose hint names --tls-ca", f)
	}
}

// TestClassifyTokenOfAnotherID: a token refused for the agent's id (one
// made at random because --agent-id was not given) says to set
// --agent-id, not to check the token (found by hand).
func TestClassifyTokenOfAnotherID(t *testing.T) {
	f := classify(protocol.Errorf(protocol.StatusPermissionDenied, `this token may not send as agent "agent-c66e"`))
	if !f.permanent || !strings.Contains(f.hint, "--agent-id") {
		t.Fatalf("classify: %+v, want a permanent failure whose hint names --agent-id", f)
	}
}
