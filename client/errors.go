package client

import "github.com/sluicehq/sluice/internal/protocol"

// Status is how the sink (or the connection) ended a session, as
// StatusOf reads it from an error of this package. The names are the
// protocol's (docs/protocol.md), whatever transport carried the session.
type Status = protocol.Status

// Session statuses an error can carry.
const (
	StatusUnknown           = protocol.StatusUnknown
	StatusCanceled          = protocol.StatusCanceled
	StatusInvalid           = protocol.StatusInvalid
	StatusUnauthenticated   = protocol.StatusUnauthenticated
	StatusPermissionDenied  = protocol.StatusPermissionDenied
	StatusResourceExhausted = protocol.StatusResourceExhausted
	StatusOutOfRange        = protocol.StatusOutOfRange
	StatusUnavailable       = protocol.StatusUnavailable
	StatusDeadlineExceeded  = protocol.StatusDeadlineExceeded
	StatusInternal          = protocol.StatusInternal
)

// StatusOf is the session status err carries: the sink's refusal
// (StatusPermissionDenied for a token that may not read, say),
// StatusUnavailable for a connection that broke, StatusUnknown for nil.
func StatusOf(err error) Status { return protocol.StatusOf(err) }

// IsRetryable reports whether trying again later may succeed: a broken
// connection, a sink shutting down or a limit reached are transient; a
// refused identity, a bad request or a position that does not exist are
// not. A following Consumer retries exactly these by itself.
func IsRetryable(err error) bool { return protocol.IsRetryable(err) }
