package rsocket

import (
	"context"
	"reflect"
)

// Callers' contexts: a request-response ends with its caller's context,
// watched with one context.AfterFunc per connection and context (watch,
// unwatch, ctxDone) rather than one per request, which would cost
// allocations and a lock on the caller's context shared by every
// connection using it. The watches are under Conn.mu.

// ctxWatch watches one caller context for every request-response of the
// connection made with it: one context.AfterFunc per connection and
// context instead of one per request (which costs allocations and, worse,
// a lock on the caller's context shared by every connection using it).
type ctxWatch struct {
	n    int // live streams made with the context
	stop func() bool
}

// maxIdleWatches bounds the watches kept with no stream, for contexts
// that are reused but never end.
const maxIdleWatches = 8

// watch makes the end of ctx cancel st (CANCEL to the peer, ctx's error to
// the caller). Under mu.
func (c *Conn) watch(ctx context.Context, st *stream) {
	if reflect.TypeOf(ctx).Kind() != reflect.Pointer {
		// A context type that may not hash as a map key (a struct with
		// a slice would panic): a watch of its own, as before, and the
		// stream is not recycled since the watch refers to it.
		stop := context.AfterFunc(ctx, func() { c.post(func() { c.cancelStream(st, ctx.Err()) }) })
		st.cancel, st.pooled = func() { stop() }, false
		return
	}
	w := c.watches[ctx]
	if w == nil {
		if c.watches == nil {
			c.watches = map[context.Context]*ctxWatch{}
		}
		w = &ctxWatch{}
		w.stop = context.AfterFunc(ctx, func() { c.post(func() { c.ctxDone(ctx) }) })
		c.watches[ctx] = w
	}
	w.n++
	st.watchedCtx, st.conn = ctx, c
}

// unwatch ends st's watch, if any. Under mu.
func (c *Conn) unwatch(st *stream) {
	if st.watchedCtx == nil {
		return
	}
	ctx := st.watchedCtx
	st.watchedCtx = nil
	w := c.watches[ctx]
	if w == nil {
		return
	}
	if w.n--; w.n == 0 && len(c.watches) > maxIdleWatches {
		w.stop()
		delete(c.watches, ctx)
	}
}

// ctxDone cancels the streams made with ctx, which ended. Under mu.
func (c *Conn) ctxDone(ctx context.Context) {
	if c.watches[ctx] == nil {
		return
	}
	for _, st := range c.streams {
		if st.watchedCtx == ctx {
			c.cancelStream(st, ctx.Err())
		}
	}
	delete(c.watches, ctx)
}
