package rsocket

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// rawSock reads and writes a socket's descriptor with one syscall per
// attempt, so that the driver knows what net.Conn hides: that a read is
// about to wait for the peer (the reader then lends its large buffer back
// while it waits), and that a write would block (a goroutine that is not
// the writer then hands the rest to it instead of waiting).
//
// The callbacks are method values made once: a closure per call would
// allocate.
type rawSock struct {
	rc      syscall.RawConn
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
	local   net.Addr
	remote  net.Addr
	network string

	// Read state, used by the one reading goroutine. onWait runs when a
	// read is about to wait for the peer, onWake when it retries after
	// the wait; either may replace rbuf (the reader swaps buffers).
	rbuf           []byte
	rn             int
	rerr           error
	waited         bool
	onWait, onWake func()

	// Write state, used under the writing flag (one writer at a time).
	wbuf []byte
	wn   int
	werr error
}

// newRawSock returns the raw access to c, or nil when c is not a plain
// socket (TLS, net.Pipe, a test's wrapper): those keep net.Conn's calls.
func newRawSock(c any) *rawSock {
	nc, ok := c.(net.Conn)
	if !ok {
		return nil
	}
	var network string
	switch c.(type) {
	case *net.TCPConn:
		network = "tcp"
	case *net.UnixConn:
		network = "unix"
	default:
		return nil
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	s := &rawSock{rc: rc, local: nc.LocalAddr(), remote: nc.RemoteAddr(), network: network}
	s.readFn, s.writeFn = s.doRead, s.doWrite
	return s
}

// read reads into b once data is there, like net.Conn.Read (into the
// buffer onWait or onWake put in rbuf, if they did).
func (s *rawSock) read(b []byte) (int, error) {
	s.rbuf, s.rn, s.rerr, s.waited = b, 0, nil, false
	err := s.rc.Read(s.readFn)
	s.rbuf = nil
	if err != nil {
		return 0, s.opError("read", err)
	}
	if s.rerr != nil {
		return 0, s.rerr
	}
	return s.rn, nil
}

func (s *rawSock) doRead(fd uintptr) bool {
	if s.waited && s.onWake != nil {
		s.onWake()
	}
	for {
		n, err := syscall.Read(int(fd), s.rbuf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			s.waited = true
			if s.onWait != nil {
				s.onWait()
			}
			return false // wait until readable, then call again
		case err != nil:
			s.rerr = s.opError("read", os.NewSyscallError("read", err))
		case n == 0 && len(s.rbuf) > 0:
			s.rerr = io.EOF
		default:
			s.rn = n
		}
		return true
	}
}

// tryWrite writes what the socket takes now without waiting: n < len(b)
// with a nil error means the socket buffer is full.
func (s *rawSock) tryWrite(b []byte) (int, error) {
	s.wbuf, s.wn, s.werr = b, 0, nil
	err := s.rc.Write(s.writeFn)
	s.wbuf = nil
	if err != nil {
		return s.wn, s.opError("write", err)
	}
	return s.wn, s.werr
}

func (s *rawSock) doWrite(fd uintptr) bool {
	for s.wn < len(s.wbuf) {
		n, err := syscall.Write(int(fd), s.wbuf[s.wn:])
		if n > 0 {
			s.wn += n
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true // full: the writer goroutine waits, not us
		case err != nil:
			s.werr = s.opError("write", os.NewSyscallError("write", err))
			return true
		}
	}
	return true
}

// opError makes err look like net.Conn's own errors ("read tcp A->B: ..."),
// which callers and logs already know.
func (s *rawSock) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err // RawConn's own OpError says "raw-read"
	}
	return &net.OpError{Op: op, Net: s.network, Source: s.local, Addr: s.remote, Err: err}
}
