// Package rsocketcall is the run of `sluice rsocket rr|fnf|push|stream|
// channel`: one request of an interaction model on an RSocket client,
// what comes back printed one element per line.
package rsocketcall

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/balance"
	"github.com/sluicehq/sluice/rsocket/frame"
)

// Call is one request.
type Call struct {
	Model   string // rr, fnf, push, stream or channel
	Payload rsocket.Payload
	HasData bool      // channel: Payload's data is its first element (else Stdin's first line)
	N       uint32    // stream and channel credits, granted again each time they are used up
	Stdin   io.Reader // channel: the elements to send, one per line
}

// ServerError is an ERROR frame the server answered a request or a
// stream with: the command prints its message alone.
type ServerError struct{ Err *rsocket.Error }

func (e *ServerError) Error() string { return e.Err.Error() }
func (e *ServerError) Unwrap() error { return e.Err }

// failed marks an ERROR from the server as a *ServerError.
func failed(err error) error {
	var re *rsocket.Error
	if errors.As(err, &re) {
		return &ServerError{re}
	}
	return err
}

func bytesOf(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// Do makes the call on c and prints what comes back: data on stdout, one
// element per line; that a fire-and-forget or a push went out, on
// stderr. An ERROR from the server is a *ServerError.
func (call Call) Do(ctx context.Context, c balance.Requester, stdout, stderr io.Writer) error {
	p, n := call.Payload, call.N
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	print := func(p rsocket.Payload) { w.Write(p.Data); w.WriteByte('\n') }
	switch call.Model {
	case "rr":
		r, err := c.RequestResponse(ctx, p)
		if err != nil {
			return failed(err)
		}
		print(r)
	case "fnf":
		if err := c.FireAndForget(ctx, p); err != nil {
			return err
		}
		// Nothing comes back: say it went out, on stderr (stdout is for
		// what the server sends).
		fmt.Fprintf(stderr, "sent: fire-and-forget, %s (no answer comes back)\n", payloadSize(p))
	case "push":
		if err := c.MetadataPush(ctx, p.Metadata); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "sent: metadata push, %s (no answer comes back)\n", bytesOf(len(p.Metadata)))
	case "stream":
		s, err := c.RequestStream(ctx, p, n)
		if err != nil {
			return err
		}
		return drain(s, print, w)
	case "channel":
		lines := bufio.NewScanner(call.Stdin)
		lines.Buffer(make([]byte, 64<<10), frame.MaxFrameSize)
		read := 0 // lines read from stdin
		// A line over the scanner's bound ends the channel with an error
		// that names it: before, the scan stopped there and the channel
		// completed, exit 0, the rest of stdin unsent (found by hand,
		// 2026-11-29).
		tooLong := func() error {
			if err := lines.Err(); err != nil {
				return fmt.Errorf("stdin line %d: %w (an element is one line, at most %s)", read+1, err, bytesOf(frame.MaxFrameSize))
			}
			return nil
		}
		if !call.HasData {
			if lines.Scan() {
				p.Data, read = append([]byte(nil), lines.Bytes()...), 1
			} else if err := tooLong(); err != nil {
				return err
			}
		}
		ch, err := c.RequestChannel(ctx, p, n)
		if err != nil {
			return err
		}
		var stdinErr atomic.Pointer[error]
		go func() {
			for lines.Scan() {
				read++
				if ch.Send(rsocket.Payload{Data: append([]byte(nil), lines.Bytes()...)}) != nil {
					return
				}
			}
			if err := tooLong(); err != nil {
				stdinErr.Store(&err)
				ch.Error(err) // ends Next too
				return
			}
			ch.Complete()
		}()
		err = drain(&ch.Stream, print, w)
		if e := stdinErr.Load(); e != nil {
			w.Flush()
			return *e
		}
		return err
	}
	return nil
}

// payloadSize says how large p is: "5 bytes of data, 3 of metadata".
func payloadSize(p rsocket.Payload) string {
	s := bytesOf(len(p.Data)) + " of data"
	if p.Metadata != nil {
		s += fmt.Sprintf(", %d of metadata", len(p.Metadata))
	}
	return s
}

func drain(s *rsocket.Stream, print func(rsocket.Payload), w *bufio.Writer) error {
	for {
		p, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			w.Flush()
			return failed(err)
		}
		print(p)
		if w.Buffered() > 32<<10 {
			w.Flush()
		}
	}
}
