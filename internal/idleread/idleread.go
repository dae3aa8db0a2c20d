// Package idleread bounds how long an HTTP request body may send nothing.
// A client frozen mid-body, or gone without a FIN, would otherwise hold
// its handler (and what the handler holds: an upload, a buffer) for as
// long as the kernel keeps the connection, which for a stopped process
// whose kernel still answers is forever. A slow client is not cut off:
// only silence counts, not the body's total time.
//
// It works through the connection's read deadline
// (http.ResponseController), so a read blocked in the kernel returns, and
// another goroutine can stop the reads at once (Interrupt): the file
// transfer server does when a newer request takes an upload over.
package idleread

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// ErrIdle is a read that waited longer than the idle timeout.
var ErrIdle = errors.New("the request body sent nothing within the idle timeout")

// Body is a request body whose reads fail with ErrIdle after idle of
// silence, or with the Interrupt's error.
type Body struct {
	r    io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	why  atomic.Pointer[error] // set once: why reads stopped
	eof  atomic.Bool           // the whole body was read
	// left is what the body still has to bring by its Content-Length,
	// -1 when it declared none (Remaining).
	left int64
}

// New wraps r's body, whose connection w answers on.
func New(w http.ResponseWriter, r *http.Request, idle time.Duration) *Body {
	return &Body{r: r.Body, rc: http.NewResponseController(w), idle: idle, left: r.ContentLength}
}

func (b *Body) Read(p []byte) (int, error) {
	// The deadline first, then the check: an Interrupt that comes between
	// them moves the deadline to the past after ours.
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle))
	if why := b.why.Load(); why != nil {
		return 0, *why
	}
	n, err := b.r.Read(p)
	if b.left >= 0 {
		b.left = max(b.left-int64(n), 0)
	}
	switch {
	case err == io.EOF:
		// The whole body is in. net/http has cleared the deadline and
		// started its own read, which watches for the client going away
		// while the handler runs and cancels the request's context if it
		// fails: Interrupt must not set a deadline any more.
		b.eof.Store(true)
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		b.why.CompareAndSwap(nil, &ErrIdle)
		return n, *b.why.Load()
	}
	return n, err
}

// Close closes the request body.
func (b *Body) Close() error { return b.r.Close() }

// Remaining is how many bytes the body has still to bring by its
// Content-Length; false when it declared none. A reader that hands what
// it read on to other goroutines (the disk store's hasher) can tell the
// body's last block by it. For the goroutine that reads.
func (b *Body) Remaining() (int64, bool) { return b.left, b.left >= 0 }

// Interrupt makes the reads fail with why, a blocked one too; from any
// goroutine. The first reason sticks.
func (b *Body) Interrupt(why error) {
	b.why.CompareAndSwap(nil, &why)
	if !b.eof.Load() {
		_ = b.rc.SetReadDeadline(time.Now())
	}
}

// Stopped is why the reads were stopped (ErrIdle or the Interrupt's
// reason), or nil.
func (b *Body) Stopped() error {
	if why := b.why.Load(); why != nil {
		return *why
	}
	return nil
}
