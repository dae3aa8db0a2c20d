package cli

import (
	"fmt"
	"strings"
)

// DialHint says what a failure to reach a server most likely means, for
// a person: the raw gRPC or transport text alone ("connection error: desc
// = transport: Error while dialing: dial tcp …: connect: connection
// refused", "http2: frame too large, note that the frame header looked
// like an HTTP/1.1 header") left a new user guessing (issue 24). what
// names the server ("sink", "agent", "server"), addr its address, flag
// and listen the flag that took it and what that flag wants ("the
// sink's --listen address"). An error it does not recognize is returned
// as it is.
func DialHint(err error, what, addr, flag, listen string) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	switch {
	case strings.Contains(s, `malformed HTTP response "\x00\x00`):
		// An HTTP/1.1 client read an HTTP/2 frame (the server's SETTINGS).
		return &hinted{err, fmt.Sprintf("%s answers HTTP/2 (a gRPC listener, such as the sink's); %s takes %s", addr, flag, listen)}
	case strings.Contains(s, "frame header looked like an HTTP/1.1 header"),
		strings.Contains(s, "error reading server preface: http2: frame too large"), // an HTTP/1.0 answer
		strings.Contains(s, "malformed HTTP response"):
		return &hinted{err, fmt.Sprintf("%s answers HTTP/1.1; %s takes %s", addr, flag, listen)}
	case strings.Contains(s, "error reading server preface: EOF"), strings.Contains(s, "error reading server preface") && strings.Contains(s, "connection reset"):
		// A TLS listener drops a plain-text HTTP/2 client without a word
		// (EOF, or a reset when the client's preface is still unread).
		return &hinted{err, fmt.Sprintf("%v (%s closed the connection before answering: if it serves TLS, add --tls-ca)", err, addr)}
	case strings.Contains(s, "connection refused"):
		return &hinted{err, fmt.Sprintf("%v (is the %s running at %s?)", err, what, addr)}
	}
	return err
}

// hinted is an error with a message for a person, which still matches
// its cause for errors.Is and errors.As.
type hinted struct {
	err error
	msg string
}

func (h *hinted) Error() string { return h.msg }
func (h *hinted) Unwrap() error { return h.err }
