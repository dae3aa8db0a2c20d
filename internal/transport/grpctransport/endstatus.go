package grpctransport

import (
	"context"
	"io"
	"sync"
)

// endStatus finds, for a client's Send that gRPC answered with io.EOF (the
// stream has ended), the status the stream ended with, which only a Recv
// returns, without a second goroutine calling Recv on the stream: gRPC
// forbids concurrent RecvMsg calls on one stream, and a Recv made here
// while the session's reader runs would race it (found by -race:
// TestProduceIdempotentRetryIsDuplicate in package client) and could take
// a response, an acknowledgement say, meant for the reader.
//
// The session's reader calls recv, which remembers the error that ends
// the stream. A Send that finds the stream ended waits for the reader to
// see that error when a reader has started; before any (an agent's Hello,
// sent before its reader starts), no one else reads, so it looks itself.
type endStatus struct {
	mu      sync.Mutex // held by whoever calls the stream's Recv
	started bool       // a reader called recv; under mu
	err     error      // the error that ended the stream, once seen; under mu
	ended   chan struct{}
	once    sync.Once
}

func newEndStatus() *endStatus { return &endStatus{ended: make(chan struct{})} }

// recv calls streamRecv for the session's reader; an error it returns is
// the stream's end status, kept for Send. After the end, recv returns it
// again without calling streamRecv.
func recv[T any](e *endStatus, streamRecv func() (T, error)) (T, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = true
	if e.err != nil {
		var zero T
		return zero, e.err
	}
	v, err := streamRecv()
	if err != nil {
		e.endLocked(err)
	}
	return v, err
}

func (e *endStatus) endLocked(err error) {
	e.err = err
	e.once.Do(func() { close(e.ended) })
}

// afterSendEOF returns the status the stream ended with, for a Send that
// gRPC answered with io.EOF. Waiting for the reader ends with ctx (Close
// cancels it), then returning io.EOF.
func afterSendEOF[T any](ctx context.Context, e *endStatus, streamRecv func() (T, error)) error {
	e.mu.Lock()
	if !e.started {
		// No reader yet: Recv here, dropping what comes before the
		// status (the session is over; nothing will read it).
		for e.err == nil {
			if _, err := streamRecv(); err != nil {
				e.endLocked(err)
			}
		}
	}
	if err := e.err; err != nil {
		e.mu.Unlock()
		return err
	}
	e.mu.Unlock()
	select {
	case <-e.ended:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.err
	case <-ctx.Done():
		return io.EOF
	}
}
