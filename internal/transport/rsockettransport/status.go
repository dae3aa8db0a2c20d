package rsockettransport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// codeBase is the first of the application-defined ERROR codes
// (0x301..0xFFFFFFFE in Protocol.md): a session's Status s travels as
// ERROR[codeBase+s] with the SessionError's message as the ERROR's data.
const codeBase = frame.ErrorCodeMinApplication

// statusCode is s's ERROR code.
func statusCode(s protocol.Status) frame.ErrorCode { return codeBase + frame.ErrorCode(s) }

// streamError is err as the ERROR a responder's handler returns: a
// SessionError keeps its status and message, the context errors become
// Canceled and DeadlineExceeded, anything else Internal (a bug, like a
// gRPC handler's plain error).
func streamError(err error) error {
	if err == nil {
		return nil
	}
	s := protocol.StatusInternal
	msg := err.Error()
	var se *protocol.SessionError
	switch {
	case errors.As(err, &se):
		s, msg = se.Status, se.Msg
	case errors.Is(err, context.Canceled):
		s = protocol.StatusCanceled
	case errors.Is(err, context.DeadlineExceeded):
		s = protocol.StatusDeadlineExceeded
	}
	return &rsocket.Error{Code: statusCode(s), Message: msg}
}

// sessionError is an error from the RSocket API as the protocol sees it:
// io.EOF stays io.EOF (the peer completed its half), an ERROR with one of
// our codes becomes a SessionError with that Status, the spec's stream
// codes map to the nearest Status (REJECTED: the peer serves no sluice
// sessions here, CANCELED, INVALID, APPLICATION_ERROR: a peer's bug), and
// everything else (the connection closed or broke) is Unavailable, which
// is retryable: the next session redials.
func sessionError(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	var re *rsocket.Error
	if errors.As(err, &re) {
		switch {
		case re.Code >= codeBase && re.Code < codeBase+0x100:
			s := protocol.Status(re.Code - codeBase)
			if s.String() == fmt.Sprintf("Status(%d)", s) {
				s = protocol.StatusUnknown // a newer peer's status
			}
			return &protocol.SessionError{Status: s, Msg: re.Message}
		case re.Code == frame.ErrorCodeCanceled:
			return &protocol.SessionError{Status: protocol.StatusCanceled, Msg: re.Message}
		case re.Code == frame.ErrorCodeInvalid:
			return &protocol.SessionError{Status: protocol.StatusInvalid, Msg: re.Message}
		case re.Code == frame.ErrorCodeRejected:
			return &protocol.SessionError{Status: protocol.StatusUnavailable, Msg: "rejected: " + re.Message}
		case re.Code == frame.ErrorCodeApplicationError:
			return &protocol.SessionError{Status: protocol.StatusInternal, Msg: re.Message}
		}
		return &protocol.SessionError{Status: protocol.StatusUnavailable, Msg: re.Error()}
	}
	// The caller's context ended the session: that is its own doing, not
	// an unavailable sink to retry, and gRPC and memconn say Canceled (or
	// DeadlineExceeded) too (conntest's ContextCancelEndsSession).
	switch {
	case errors.Is(err, context.Canceled):
		return &protocol.SessionError{Status: protocol.StatusCanceled, Msg: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &protocol.SessionError{Status: protocol.StatusDeadlineExceeded, Msg: err.Error()}
	}
	return &protocol.SessionError{Status: protocol.StatusUnavailable, Msg: err.Error()}
}
