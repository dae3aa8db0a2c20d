package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// ListenFlag binds addr, the value of flag, and names both in the error
// ("--ingest 127.0.0.1:7401: address already in use", exit 1), so that
// a daemon binding every listener before it creates state (a spool, an
// agent id, a store) ends before anything is on disk (issue 24). An
// empty addr is a flag error (exit 2): Listen would take it for every
// interface and a random port (found by hand: `--ingest ""` opened an
// ingest to every network).
func ListenFlag(flag, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, &exit{code: 2, msg: flag + ": empty address: want HOST:PORT (HOST empty for every interface)"}
	}
	lis, err := net.Listen("tcp", addr)
	if err == nil {
		return lis, nil
	}
	cause := err
	var se *os.SyscallError
	if errors.As(err, &se) {
		cause = se.Err
	}
	return nil, &exit{code: 1, msg: fmt.Sprintf("%s %s: %v", flag, addr, cause)}
}

// exit is an error with its exit status (ExitCoder).
type exit struct {
	code int
	msg  string
}

func (e *exit) Error() string { return e.msg }
func (e *exit) ExitCode() int { return e.code }
