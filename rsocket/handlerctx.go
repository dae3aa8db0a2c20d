package rsocket

import (
	"context"
	"sync"
	"time"
)

// handlerCtx, the context a responder's handler gets: part of its stream,
// it allocates nothing unless asked for Done, and registers with no other
// context, so a request costs no context allocations.

// handlerCtx is a responder's context, part of its stream: it ends when
// the stream does or the connection closes (drain fails every stream).
// Done's channel is made only when asked for (most request-response
// handlers never ask), and nothing registers with the connection's
// context: a request costs no context allocations.
type handlerCtx struct {
	parent context.Context // values only; it never ends
	mu     sync.Mutex
	done   chan struct{}
	err    error
}

func (h *handlerCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (h *handlerCtx) Value(key any) any { return h.parent.Value(key) }

func (h *handlerCtx) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		h.done = make(chan struct{})
		if h.err != nil {
			close(h.done)
		}
	}
	return h.done
}

func (h *handlerCtx) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

func (h *handlerCtx) cancel() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = context.Canceled
		if h.done != nil {
			close(h.done)
		}
	}
}
