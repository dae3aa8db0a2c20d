package grpctransport

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/protocol"
)

var toCode = map[protocol.Status]codes.Code{
	protocol.StatusUnknown:           codes.Unknown,
	protocol.StatusCanceled:          codes.Canceled,
	protocol.StatusInvalid:           codes.InvalidArgument,
	protocol.StatusUnauthenticated:   codes.Unauthenticated,
	protocol.StatusPermissionDenied:  codes.PermissionDenied,
	protocol.StatusResourceExhausted: codes.ResourceExhausted,
	protocol.StatusOutOfRange:        codes.OutOfRange,
	protocol.StatusUnavailable:       codes.Unavailable,
	protocol.StatusDeadlineExceeded:  codes.DeadlineExceeded,
	protocol.StatusInternal:          codes.Internal,
	// Additive: before it, FailedPrecondition read back as StatusInvalid.
	protocol.StatusFailedPrecondition: codes.FailedPrecondition,
	// Additive: before it, Aborted read back as StatusUnavailable (and no
	// sink sent it).
	protocol.StatusAborted: codes.Aborted,
}

var fromCode = func() map[codes.Code]protocol.Status {
	m := make(map[codes.Code]protocol.Status, len(toCode)+3)
	for s, c := range toCode {
		m[c] = s
	}
	// gRPC codes with no protocol status of their own.
	m[codes.DataLoss] = protocol.StatusInternal
	return m
}()

// StatusError is err as a gRPC status error, for a server handler to
// return: a SessionError keeps its status and message, the context errors
// become Canceled and DeadlineExceeded, anything else Internal.
func StatusError(err error) error {
	if err == nil {
		return nil
	}
	var se *protocol.SessionError
	if errors.As(err, &se) {
		return status.Error(toCode[se.Status], se.Msg)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// SessionError is a gRPC error as the protocol sees it: io.EOF stays
// io.EOF (the peer closed cleanly), a status becomes a *SessionError with
// the matching Status, other errors are returned as they are.
func SessionError(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	s, known := fromCode[st.Code()]
	if !known {
		s = protocol.StatusUnknown
	}
	return &protocol.SessionError{Status: s, Msg: st.Message()}
}
