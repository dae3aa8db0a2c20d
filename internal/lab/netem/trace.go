package netem

import (
	"sync"
	"time"
)

// tracer records the link's decisions on its own clock. Tests assert on
// these virtual times (a chunk's due time is its release plus Delay; the
// releases conform to the token bucket) and on the order of events (a
// fresh flow is served before the bulk flow), never on how long something
// took by the wall clock, which a loaded machine stretches. A Link without
// a tracer (every Link but the tests') pays one nil check per chunk.
type tracer struct {
	mu  sync.Mutex
	evs []traceEvent
}

type traceKind uint8

const (
	evQueue   traceKind = iota // a chunk joined its flow's bottleneck queue
	evPop                      // the scheduler took a flow's head chunk
	evRelease                  // the chunk leaves the bottleneck at ready
	evDeliver                  // a chunk entered the delay line, due at due
	evWrite                    // the writer is about to write a chunk, at wrote
)

// traceEvent is one decision. Times are on the link's clock (Link.now).
type traceEvent struct {
	ev      traceKind
	up      bool   // client → server
	flow    uint64 // the pair's id
	n       int    // payload bytes (0 for end-of-stream markers)
	kind    uint8  // kindData, kindEOF or kindRST
	at      time.Duration
	ready   time.Duration
	vt      time.Duration // evRelease: the token bucket's clock after the chunk
	due     time.Duration
	wrote   time.Duration
	backlog []uint64 // evPop: the other flows that had chunks queued
}

func (t *tracer) add(e traceEvent) {
	t.mu.Lock()
	t.evs = append(t.evs, e)
	t.mu.Unlock()
}

// events returns a copy of the events so far, optionally only those of one
// kind and direction.
func (t *tracer) events(ev traceKind, up bool) []traceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []traceEvent
	for _, e := range t.evs {
		if e.ev == ev && e.up == up {
			out = append(out, e)
		}
	}
	return out
}

// all returns a copy of every event of one direction, in order.
func (t *tracer) all(up bool) []traceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []traceEvent
	for _, e := range t.evs {
		if e.up == up {
			out = append(out, e)
		}
	}
	return out
}

func (f *flow) up() bool { return f.d == f.l.up }
