package netem

import (
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunk kinds
const (
	kindData uint8 = iota
	kindEOF        // the source sent FIN: half-close the destination
	kindRST        // the source failed: reset both sides
)

// chunk is a piece of a flow's byte stream, or an end-of-stream marker.
type chunk struct {
	buf  *[]byte // pooled; nil for markers
	n    int
	kind uint8
	at   time.Duration // link clock time it was read from the source
	due  time.Duration // link clock time to write it to the destination
}

var (
	pool16 = sync.Pool{New: func() any { b := make([]byte, limitedChunk); return &b }}
	pool64 = sync.Pool{New: func() any { b := make([]byte, unlimitedChunk); return &b }}
)

// getBuf returns a pooled buffer of at least size bytes (size <= 64 KiB).
func getBuf(size int) *[]byte {
	if size <= limitedChunk {
		return pool16.Get().(*[]byte)
	}
	return pool64.Get().(*[]byte)
}

func (c *chunk) free() {
	if c.buf == nil {
		return
	}
	switch cap(*c.buf) {
	case limitedChunk:
		pool16.Put(c.buf)
	case unlimitedChunk:
		pool64.Put(c.buf)
	}
	c.buf = nil
}

// signal does a non-blocking send on a wake-up channel of capacity 1.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// direction is one direction of the link: the shared bottleneck of all flows
// going that way.
type direction struct {
	l         *Link
	chunk     int   // read size
	rate      int64 // bytes/s, 0 = unlimited
	queueCap  int64
	burstDur  time.Duration // Burst at Rate
	delivered atomic.Int64

	mu      sync.Mutex
	fresh   fifo[*flow] // flows that just got a chunk queued, served first
	old     fifo[*flow] // flows served round-robin, one chunk a turn
	queued  int64       // bytes queued at the bottleneck, all flows
	blocked []*flow     // readers waiting for room in the queue
	idle    bool        // the scheduler waits for kick
	kick    chan struct{}

	vt time.Duration // token bucket: tokens = min(Burst, (now-vt)×Rate); scheduler only
}

func newDirection(l *Link, chunk int) *direction {
	d := &direction{
		l:        l,
		chunk:    chunk,
		rate:     l.cfg.Rate,
		queueCap: l.cfg.QueueBytes,
		kick:     make(chan struct{}, 1),
	}
	if d.rate > 0 {
		d.burstDur = d.txTime(l.cfg.Burst)
		d.vt = -d.burstDur // start with a full bucket
	}
	return d
}

// txTime is how long n bytes take at the bottleneck rate.
func (d *direction) txTime(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Second) {
		return time.Duration(min(float64(n)/float64(d.rate)*1e9, math.MaxInt64/2))
	}
	return time.Duration(n * int64(time.Second) / d.rate)
}

// run is the scheduler: it takes chunks round-robin from the flows that have
// some queued, passes each through the token bucket and hands it to its
// flow's delay line.
func (d *direction) run() {
	defer d.l.wg.Done()
	var s sleeper
	defer s.close()
	for {
		d.mu.Lock()
		var f *flow
		var c chunk
		// As in fq_codel: a flow that gets a chunk while in neither list
		// joins fresh, which is served first. After its turn, a flow
		// from either list goes to the back of old, even if it has
		// nothing left, and leaves old only when its turn finds it empty.
		// So a flow gets priority only after a full round with nothing
		// queued: a bulk flow cannot gain it by keeping its queue short.
		for d.fresh.len()+d.old.len() > 0 {
			if d.fresh.len() > 0 {
				f = d.fresh.pop()
			} else {
				f = d.old.pop()
			}
			if f.pending.len() == 0 { // idle for a round, or purged
				f.inRing = false
				f = nil
				continue
			}
			c = f.pending.pop()
			d.old.push(f)
			if tr := d.l.trace; tr != nil {
				tr.add(traceEvent{ev: evPop, up: f.up(), flow: f.p.id, n: c.n, at: c.at, backlog: d.backlogLocked()})
			}
			break
		}
		if f == nil {
			d.idle = true
			d.mu.Unlock()
			select {
			case <-d.kick:
			case <-d.l.done:
				return
			}
			continue
		}
		d.mu.Unlock()

		// The chunk is released when the bucket holds c.n tokens: when
		// its last byte would have left the bottleneck. This follows
		// from the bucket and the chunk's arrival alone, not from when
		// this goroutine runs, so waking late costs neither rate nor
		// delay (the bucket only fills while the link is idle, and
		// a chunk that waited in the queue found it busy).
		d.vt = max(d.vt, c.at-d.burstDur) + d.txTime(int64(c.n))
		ready := max(c.at, d.vt)
		if tr := d.l.trace; tr != nil {
			tr.add(traceEvent{ev: evRelease, up: f.up(), flow: f.p.id, n: c.n, at: c.at, ready: ready, vt: d.vt})
		}
		if !s.sleepUntil(d.l, ready, d.l.done) {
			c.free()
			return
		}

		d.mu.Lock()
		dead := f.dead
		if !dead {
			f.queued -= int64(c.n)
			d.queued -= int64(c.n)
			if f.queued == 0 && f.inBlocked {
				signal(f.wakeR) // a flow may always queue one chunk
			}
		}
		d.wakeBlockedLocked()
		d.mu.Unlock()
		if dead {
			c.free()
			continue
		}
		f.deliver(c, ready)
	}
}

// backlogLocked lists the pairs whose flows in this direction have chunks
// queued (for the tracer).
func (d *direction) backlogLocked() []uint64 {
	var ids []uint64
	for _, q := range []*fifo[*flow]{&d.fresh, &d.old} {
		for i := range q.len() {
			if f := q.at(i); f.pending.len() > 0 {
				ids = append(ids, f.p.id)
			}
		}
	}
	return ids
}

// wakeBlockedLocked wakes the readers waiting for room if there is some.
func (d *direction) wakeBlockedLocked() {
	if d.queued >= d.queueCap || len(d.blocked) == 0 {
		return
	}
	for i, f := range d.blocked {
		f.inBlocked = false
		signal(f.wakeR)
		d.blocked[i] = nil
	}
	d.blocked = d.blocked[:0]
}

// flow is one direction of one connection.
type flow struct {
	p        *pair
	d        *direction
	l        *Link
	src, dst net.Conn
	wakeR    chan struct{} // wakes the reader (room in window or queue)
	wakeW    chan struct{} // wakes the writer (a chunk in the line)

	// guarded by d.mu
	pending   fifo[chunk] // queued at the bottleneck
	queued    int64       // bytes in pending, and the chunk being sent
	inRing    bool        // in d.fresh or d.old
	inBlocked bool
	dead      bool

	// guarded by mu
	mu          sync.Mutex
	line        fifo[chunk] // the delay line, ordered by due
	outstanding int64       // bytes read and not yet written
	lastDue     time.Duration
	rng         *rand.Rand
	rWaiting    bool
	wWaiting    bool
	lineDead    bool
}

func newFlow(p *pair, d *direction, src, dst net.Conn, src64 rand.Source) *flow {
	return &flow{
		p:     p,
		d:     d,
		l:     d.l,
		src:   src,
		dst:   dst,
		wakeR: make(chan struct{}, 1),
		wakeW: make(chan struct{}, 1),
		rng:   rand.New(src64),
	}
}

// readLoop reads the source and sends what it reads into the link.
func (f *flow) readLoop() {
	for {
		if !f.waitRoom() {
			return
		}
		bp := getBuf(f.d.chunk)
		n, err := f.src.Read((*bp)[:f.d.chunk])
		t := f.l.now()
		if n > 0 {
			f.send(chunk{buf: bp, n: n}, t)
		} else {
			(&chunk{buf: bp}).free()
		}
		if err != nil {
			select {
			case <-f.p.done: // our own teardown
				return
			default:
			}
			kind := kindEOF
			if !errors.Is(err, io.EOF) {
				kind = kindRST
			}
			f.send(chunk{kind: kind}, t)
			return
		}
	}
}

// waitRoom blocks while the flow has its in-flight cap reached or the
// bottleneck queue is full. It returns false once the pair is torn down.
func (f *flow) waitRoom() bool {
	f.mu.Lock()
	for f.outstanding >= f.l.window && !f.lineDead {
		f.rWaiting = true
		f.mu.Unlock()
		select {
		case <-f.wakeR:
		case <-f.p.done:
			return false
		}
		f.mu.Lock()
	}
	f.mu.Unlock()
	if f.d.rate == 0 {
		return true
	}
	d := f.d
	d.mu.Lock()
	for f.queued > 0 && d.queued >= d.queueCap && !f.dead {
		if !f.inBlocked {
			f.inBlocked = true
			d.blocked = append(d.blocked, f)
		}
		d.mu.Unlock()
		select {
		case <-f.wakeR:
		case <-f.p.done:
			return false
		}
		d.mu.Lock()
	}
	d.mu.Unlock()
	return true
}

// send puts a chunk read at time t into the link: into the bottleneck queue,
// or with no rate limit straight into the delay line.
func (f *flow) send(c chunk, t time.Duration) {
	f.mu.Lock()
	f.outstanding += int64(c.n)
	f.mu.Unlock()
	d := f.d
	if d.rate == 0 {
		f.deliver(c, t)
		return
	}
	d.mu.Lock()
	if f.dead {
		d.mu.Unlock()
		c.free()
		return
	}
	c.at = t
	f.pending.push(c)
	f.queued += int64(c.n)
	d.queued += int64(c.n)
	if !f.inRing {
		f.inRing = true
		d.fresh.push(f)
	}
	if tr := f.l.trace; tr != nil {
		tr.add(traceEvent{ev: evQueue, up: f.up(), flow: f.p.id, n: c.n, kind: c.kind, at: t})
	}
	kick := d.idle
	d.idle = false
	d.mu.Unlock()
	if kick {
		signal(d.kick)
	}
}

// deliver puts a chunk that left the bottleneck at time ready into the delay
// line.
func (f *flow) deliver(c chunk, ready time.Duration) {
	cfg := &f.l.cfg
	f.mu.Lock()
	if f.lineDead {
		f.mu.Unlock()
		c.free()
		return
	}
	due := ready + cfg.Delay
	if j := cfg.Jitter; j > 0 {
		due += time.Duration(f.rng.Int64N(int64(2*j)+1)) - j
		due = max(due, ready)
	}
	due = max(due, f.lastDue) // never reorder
	f.lastDue = due
	c.due = due
	f.line.push(c)
	if tr := f.l.trace; tr != nil {
		tr.add(traceEvent{ev: evDeliver, up: f.up(), flow: f.p.id, n: c.n, kind: c.kind, ready: ready, due: due})
	}
	wake := f.wWaiting
	f.wWaiting = false
	f.mu.Unlock()
	if wake {
		signal(f.wakeW)
	}
}

// maxBatch bounds the chunks one writev takes.
const maxBatch = 64

// writeLoop waits for chunks to fall due and writes them to the destination.
func (f *flow) writeLoop() {
	var s sleeper
	defer s.close()
	batch := make([]chunk, 0, maxBatch)
	bufs := make(net.Buffers, 0, maxBatch)
	for {
		f.mu.Lock()
		for f.line.len() == 0 {
			f.wWaiting = true
			f.mu.Unlock()
			select {
			case <-f.wakeW:
			case <-f.p.done:
				return
			}
			f.mu.Lock()
		}
		due := f.line.peek().due
		f.mu.Unlock()
		if !s.sleepUntil(f.l, due, f.p.done) {
			return
		}

		// sleepUntil may return a little early; the head is due anyway.
		limit := max(f.l.now(), due)
		f.mu.Lock()
		for f.line.len() > 0 && f.line.peek().due <= limit && len(batch) < maxBatch {
			batch = append(batch, f.line.pop())
		}
		f.mu.Unlock()

		if tr := f.l.trace; tr != nil {
			now := f.l.now()
			for _, c := range batch {
				tr.add(traceEvent{ev: evWrite, up: f.up(), flow: f.p.id, n: c.n, kind: c.kind, due: c.due, wrote: now})
			}
		}
		var written int64
		end := kindData
		for _, c := range batch {
			if c.kind != kindData {
				end = c.kind
				break
			}
			bufs = append(bufs, (*c.buf)[:c.n])
			written += int64(c.n)
		}
		var err error
		if len(bufs) > 0 {
			w := bufs // WriteTo consumes its receiver
			_, err = w.WriteTo(f.dst)
		}
		for i := range batch {
			batch[i].free()
		}
		clear(bufs)
		bufs = bufs[:0]
		clear(batch)
		batch = batch[:0]

		if err != nil {
			select {
			case <-f.p.done:
			default:
				f.p.abort()
			}
			return
		}
		f.d.delivered.Add(written)
		f.mu.Lock()
		f.outstanding -= written
		wake := f.rWaiting && f.outstanding < f.l.window
		if wake {
			f.rWaiting = false
		}
		f.mu.Unlock()
		if wake {
			signal(f.wakeR)
		}

		switch end {
		case kindEOF:
			if cw, ok := f.dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			f.p.endOne()
			return
		case kindRST:
			f.p.abort()
			return
		}
	}
}

// purge drops the flow's data after teardown.
func (f *flow) purge() {
	d := f.d
	if d.rate > 0 {
		d.mu.Lock()
		f.dead = true
		for f.pending.len() > 0 {
			c := f.pending.pop()
			c.free()
		}
		d.queued -= f.queued
		f.queued = 0
		d.wakeBlockedLocked()
		d.mu.Unlock()
	}
	f.mu.Lock()
	f.lineDead = true
	for f.line.len() > 0 {
		c := f.line.pop()
		c.free()
	}
	f.mu.Unlock()
}

// fifo is a growable ring buffer queue.
type fifo[T any] struct {
	buf  []T
	head int
	n    int
}

func (q *fifo[T]) len() int { return q.n }

func (q *fifo[T]) push(v T) {
	if q.n == len(q.buf) {
		nb := make([]T, max(8, 2*len(q.buf)))
		k := copy(nb, q.buf[q.head:])
		copy(nb[k:], q.buf[:q.head])
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

func (q *fifo[T]) peek() *T { return &q.buf[q.head] }

// at returns the i-th element from the head.
func (q *fifo[T]) at(i int) T { return q.buf[(q.head+i)%len(q.buf)] }

func (q *fifo[T]) pop() T {
	v := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return v
}
