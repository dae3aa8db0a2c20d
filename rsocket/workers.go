package rsocket

import (
	"sync/atomic"
)

// Handler goroutines: handlers run on a pool of goroutines that keep their
// stacks (goWork, worker), bounded in how many wait idle. Fire-and-forget
// and metadata-push handlers keep no stream, so the oneway pool bounds how
// many run at once (goOneway): when it is full their jobs queue under
// Conn.mu and the reader starts them as slots free (startOneway), and
// stops reading meanwhile. Nobody waits for a slot holding mu.

const maxOneway = 1024

// goOneway runs a fire-and-forget or metadata-push handler within the
// oneway bound, or queues it for the reader to start once a slot frees
// (startOneway). Under mu: it never waits.
// The request it handles is held (hold) until f returns, or until the
// connection closes with f still queued (dropOneway).
func (c *Conn) goOneway(f func(), req Payload) {
	j := onewayJob{run: f, held: heldSize(req)}
	c.hold(j.held)
	select {
	case c.oneway <- struct{}{}:
		c.runOneway(j)
	default:
		c.onewayQueue = append(c.onewayQueue, j)
		c.onewayFull.Store(true)
	}
}

// onewayJob is a oneway handler and the bytes of its request it holds.
type onewayJob struct {
	run  func()
	held int64
}

// dropOneway releases the handlers still queued when the connection
// closes; they never run. Under mu.
func (c *Conn) dropOneway() {
	for _, j := range c.onewayQueue {
		c.releaseHeld(j.held)
	}
	c.onewayQueue = nil
	c.onewayFull.Store(false)
}

// runOneway runs j on a pooled goroutine in the slot its caller took.
func (c *Conn) runOneway(j onewayJob) {
	goWork(funcRunner(func() {
		defer func() { <-c.oneway }()
		defer c.releaseHeld(j.held)
		j.run()
	}))
}

// startOneway starts the queued oneway handlers, waiting for each slot
// without mu; the reader calls it before reading on. It returns false
// when the connection closed meanwhile (the queued handlers are dropped
// with it).
func (c *Conn) startOneway() bool {
	for c.onewayFull.Load() {
		select {
		case c.oneway <- struct{}{}:
		case <-c.done:
			return false
		}
		c.mu.Lock()
		var j onewayJob
		if len(c.onewayQueue) > 0 {
			j = c.onewayQueue[0]
			c.onewayQueue[0] = onewayJob{}
			c.onewayQueue = c.onewayQueue[1:]
		}
		if len(c.onewayQueue) == 0 {
			c.onewayQueue = nil
			c.onewayFull.Store(false)
		}
		c.mu.Unlock()
		c.combine()
		if j.run == nil {
			<-c.oneway
			break
		}
		c.runOneway(j)
	}
	return true
}

// Handlers run on pooled goroutines: a new goroutine per request costs
// its creation and, since answering runs the machine, growing its stack
// each time; a pooled one keeps its stack. idleWorkers bounds how many
// wait for work (the rest exit), so a burst does not leave thousands.
var (
	work        = make(chan runner)
	idleWorkers atomic.Int32
)

// runner is work for the pool: a func, or a stream to answer (no closure).
type runner interface{ run() }

type funcRunner func()

func (f funcRunner) run() { f() }

const maxIdleWorkers = 512

// goWork runs f on an idle pooled goroutine, or a new one.
func goWork(f runner) {
	select {
	case work <- f:
	default:
		go worker(f)
	}
}

func worker(f runner) {
	for {
		f.run()
		if idleWorkers.Add(1) > maxIdleWorkers {
			idleWorkers.Add(-1)
			return
		}
		f = <-work
		idleWorkers.Add(-1)
	}
}
