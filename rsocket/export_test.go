package rsocket

import (
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
)

// Hooks for the external test package (rsocket_test), which holds the
// interop tests and their table.

// ReadStream is readStream: a stream must carry "0" … "n-1", then
// complete.
var ReadStream = readStream

// NewCutProxy is newCutProxy for the interop resume tests, with every
// connection's client→server cut at minUp bytes or more (0: anywhere):
// past a WebSocket handshake and the RESUME, so that a cut breaks a
// resumed session instead of failing a redial.
func NewCutProxy(t testing.TB, upstream string, seed uint64, n, maxUp, maxDown, minUp int) *faultproxy.Proxy {
	p := faultproxy.New(t, upstream)
	plan := randomCuts(seed, n, maxUp, maxDown)
	plan.MinUp = minUp
	p.CutNext(plan)
	return p
}

// QueuedOutbound is the output queued and not yet written (in flight
// included): what the outbound budget bounds.
func (c *Conn) QueuedOutbound() int { return int(c.queuedBytes.Load()) }

// ReadingStopped reports whether the reader waits for outbound room.
func (c *Conn) ReadingStopped() bool { return c.readerWaiting.Load() }

// SendersWaiting is how many Send calls and answers wait for outbound room.
func (c *Conn) SendersWaiting() int { return int(c.sendersWaiting.Load()) }

// HeldRequests is the bytes of requests its pooled handlers hold.
func (c *Conn) HeldRequests() int { return int(c.held.Load()) }

// WaitingForServerBudget reports whether a reader of the connection waits
// for room in the server's budget before reading a large frame.
func (c *Conn) WaitingForServerBudget() bool { return c.budgetWaits.Load() > 0 }

// OutputMemory is what the output queue and the write in flight hold in
// memory: a large buffer's whole capacity, a small one's bytes (a
// connection keeps one anyway), the write's as takeOut noted it.
func (c *Conn) OutputMemory() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.queueMemory())
}
