package rsocket

import "testing"

// Hooks for the external test package (rsocket_test), which holds the
// interop tests and their table.

// ReadStream is readStream: a stream must carry "0" … "n-1", then
// complete.
var ReadStream = readStream

// CutProxy is the cutting TCP proxy of the resume tests (cutProxy).
type CutProxy struct{ p *cutProxy }

// NewCutProxy is newCutProxy.
func NewCutProxy(t testing.TB, upstream string, seed uint64, n, maxUp, maxDown int) CutProxy {
	return CutProxy{newCutProxy(t, upstream, seed, n, maxUp, maxDown)}
}

// Addr is the proxy's host:port.
func (c CutProxy) Addr() string { return c.p.addr() }

// Cuts is how many connections it cut; Accepted how many it took.
func (c CutProxy) Cuts() int     { return int(c.p.cuts.Load()) }
func (c CutProxy) Accepted() int { return int(c.p.accepted.Load()) }

// SetMinUpAll sets cutProxy.minUpAll.
func (c CutProxy) SetMinUpAll(n int) { c.p.set(func(p *cutProxy) { p.minUpAll = n }) }

// QueuedOutbound is the output queued and not yet written (in flight
// included): what the outbound budget bounds.
func (c *Conn) QueuedOutbound() int { return int(c.qbytes.Load()) }

// ReadingStopped reports whether the reader waits for outbound room.
func (c *Conn) ReadingStopped() bool { return c.rwait.Load() }

// SendersWaiting is how many Send calls and answers wait for outbound room.
func (c *Conn) SendersWaiting() int { return int(c.swait.Load()) }

// HeldRequests is the bytes of requests its pooled handlers hold.
func (c *Conn) HeldRequests() int { return int(c.held.Load()) }

// WaitingForServerBudget reports whether a reader of the connection waits
// for room in the server's budget before reading a large frame.
func (c *Conn) WaitingForServerBudget() bool { return c.budgetWaits.Load() > 0 }
