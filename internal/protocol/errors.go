package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrorCode says why the sink refused one message (an Error frame).
type ErrorCode uint8

const (
	CodeUnspecified       ErrorCode = iota
	CodeOversize                    // larger than Welcome.MaxMessageBytes
	CodeBadPayload                  // does not decode
	CodeUnknownDictionary           // names a dictionary the sink does not have
	CodeOutOfWindow                 // id far beyond the acknowledged watermark
	CodeOverCredit                  // sent beyond the credits granted
	CodeStoreUnavailable            // the store cannot take it now
)

var codeNames = [...]string{"UNSPECIFIED", "OVERSIZE", "BAD_PAYLOAD", "UNKNOWN_DICTIONARY", "OUT_OF_WINDOW", "OVER_CREDIT", "STORE_UNAVAILABLE"}

func (c ErrorCode) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("ErrorCode(%d)", c)
}

// Retryable says whether a message refused with this code may succeed if
// sent again unchanged: over-credit and a store that is down are about the
// moment, the others about the message.
func (c ErrorCode) Retryable() bool {
	return c == CodeOverCredit || c == CodeStoreUnavailable
}

// Status is how a whole session ended (not one message): transports map it
// to their own status (gRPC codes, RSocket ERROR codes) and back.
type Status uint8

const (
	StatusUnknown           Status = iota
	StatusCanceled                 // the local side gave up
	StatusInvalid                  // a protocol violation by the peer (bad frame, bad order)
	StatusUnauthenticated          // no or bad credentials
	StatusPermissionDenied         // credentials fine, this identity may not do it
	StatusResourceExhausted        // a limit: streams, connections, consumers, bytes
	StatusOutOfRange               // a read position that does not exist
	StatusUnavailable              // the sink is shutting down or its store is down: try again, maybe elsewhere
	StatusDeadlineExceeded         // a deadline passed (handshake, progress)
	StatusInternal                 // a bug or an unexpected local failure
	// StatusFailedPrecondition: the peer asked for something the session's
	// state cannot give (a consumer closing its side without the credit to
	// read to the end; an agent whose spool never sent ids the sink holds
	// under its agent id, detail starting with IDsTakenDetail); appended
	// so the values above keep their numbers.
	StatusFailedPrecondition
	// StatusAborted: the sink ended this Send session because a newer
	// session of the same agent id replaced it (one live session per
	// agent). The agent that sees it is not the one the sink now serves:
	// another process uses its id, or the agent already gave up on the
	// stream. Appended, like FailedPrecondition.
	StatusAborted
)

// IDsTakenDetail starts the detail of the sink's FailedPrecondition for a
// Hello whose SentBelow is at or below an id the sink holds under its
// agent id: another spool numbered and sent those ids.
const IDsTakenDetail = "message ids taken under agent id"

var statusNames = [...]string{"Unknown", "Canceled", "Invalid", "Unauthenticated", "PermissionDenied", "ResourceExhausted", "OutOfRange", "Unavailable", "DeadlineExceeded", "Internal", "FailedPrecondition", "Aborted"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", s)
}

// SessionError ends a session with a Status and a message for people.
type SessionError struct {
	Status Status
	Msg    string
}

func (e *SessionError) Error() string { return e.Status.String() + ": " + e.Msg }

// Errorf makes a SessionError.
func Errorf(s Status, format string, args ...any) error {
	return &SessionError{Status: s, Msg: fmt.Sprintf(format, args...)}
}

// StatusOf is the Status of err: a SessionError's own (anywhere in the
// chain), Canceled or DeadlineExceeded for the context errors, Unavailable
// for a connection that ended (io.EOF and other transport errors), Unknown
// for nil.
func StatusOf(err error) Status {
	if err == nil {
		return StatusUnknown
	}
	var se *SessionError
	if errors.As(err, &se) {
		return se.Status
	}
	switch {
	case errors.Is(err, context.Canceled):
		return StatusCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return StatusDeadlineExceeded
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return StatusUnavailable
	}
	return StatusUnavailable
}

// IsRetryable is the one rule for "try again later" on a session: a
// connection that broke, a sink shutting down, a limit reached or a
// deadline are transient; a refusal of who we are, a protocol violation, a
// position that does not exist or a local cancel are not, and retrying
// them would only hide the problem. The agent keeps retrying even those
// (it must deliver eventually), but reports them as needing a person.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	switch StatusOf(err) {
	case StatusUnavailable, StatusDeadlineExceeded, StatusResourceExhausted, StatusInternal, StatusUnknown:
		return true
	}
	return false
}
