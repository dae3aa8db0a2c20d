package xfer

import (
	"errors"
	"strings"
)

// Code names a refusal on the wire, the same on every transport, so a
// client can tell a refusal to give up on from one to retry after.
type Code string

const (
	CodeBadName    Code = "bad_name"
	CodeBusy       Code = "busy"
	CodeTooLarge   Code = "too_large"
	CodeNoSpace    Code = "no_space"
	CodeOffset     Code = "offset"
	CodeChecksum   Code = "checksum"
	CodeOverSize   Code = "over_size"
	CodeIncomplete Code = "incomplete"
	CodeNotFound   Code = "not_found"
	CodeInternal   Code = "internal"
)

var codeErrs = []struct {
	code Code
	err  error
}{
	{CodeBadName, ErrBadName}, {CodeBusy, ErrBusy}, {CodeTooLarge, ErrTooLarge}, {CodeNoSpace, ErrNoSpace},
	{CodeOffset, ErrOffset}, {CodeChecksum, ErrChecksum}, {CodeOverSize, ErrOverSize},
	{CodeIncomplete, ErrIncomplete}, {CodeNotFound, ErrNotFound},
}

// CodeOf is the wire code of a store error.
func CodeOf(err error) Code {
	for _, c := range codeErrs {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

// RemoteError is a refusal the server sent; it matches the store error of
// its code for errors.Is.
type RemoteError struct {
	Code Code
	Msg  string
}

func (e *RemoteError) Error() string { return "server: " + e.Msg }

func (e *RemoteError) Is(target error) bool {
	for _, c := range codeErrs {
		if c.code == e.Code && c.err == target {
			return true
		}
	}
	return false
}

// EncodeRemote and DecodeRemote carry a code in a plain message
// ("code: message"), for transports without codes of their own (RSocket,
// HTTP bodies).
func EncodeRemote(err error) string { return string(CodeOf(err)) + ": " + err.Error() }

// OurMessage tells whether s starts with one of our codes.
func OurMessage(s string) bool {
	code, _, ok := strings.Cut(s, ": ")
	if !ok {
		return false
	}
	if Code(code) == CodeInternal {
		return true
	}
	for _, c := range codeErrs {
		if c.code == Code(code) {
			return true
		}
	}
	return false
}

// DecodeRemote is the refusal EncodeRemote wrote as s.
func DecodeRemote(s string) *RemoteError {
	code, msg, ok := strings.Cut(s, ": ")
	if !ok {
		return &RemoteError{Code: CodeInternal, Msg: s}
	}
	return &RemoteError{Code: Code(code), Msg: msg}
}

// Retryable tells whether sending again (after asking the offset) can
// succeed: a refused chunk, a wrong offset, a busy name that may be a
// previous connection of ours not yet noticed dead, or a transport failure.
func Retryable(err error) bool {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return false // also when it wraps a refusal that is usually retried
	}
	var re *RemoteError
	if errors.As(err, &re) {
		switch re.Code {
		case CodeOffset, CodeChecksum, CodeIncomplete, CodeInternal, CodeBusy, CodeNotFound:
			return true
		}
		return false
	}
	return true
}

// PermanentError is a failure no retry fixes: the local file changed, or
// the server is not an xfer server or refuses our credentials.
type PermanentError struct{ Err error }

// Permanent marks err as one no retry fixes.
func Permanent(err error) error { return &PermanentError{err} }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }
