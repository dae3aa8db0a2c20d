package balance

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// A request on a connection that just died fails in one of two ways before
// the connection's Done channel is closed: its stream gets the
// connection-scoped ERROR, or the machine, closed an instant before its
// driver, refuses the request with conn.ErrClosed. Both are the
// connection's failure, so an idempotent request is sent again elsewhere;
// before, each failed the caller about once in 30 runs of
// TestKillAndRestartServer on a loaded machine. No connection is passed:
// neither case may need to look at one.
func TestConnFailedWithoutDone(t *testing.T) {
	for _, err := range []error{
		&rsocket.Error{Code: frame.ErrorCodeConnectionError, Message: "connection lost: write: broken pipe"},
		&rsocket.Error{Code: frame.ErrorCodeConnectionClose, Message: "closing"},
		fmt.Errorf("request: %w", conn.ErrClosed),
		rsocket.ErrClosed,
	} {
		if !connFailed(nil, err) {
			t.Errorf("connFailed(%v) = false, want true", err)
		}
	}
}
