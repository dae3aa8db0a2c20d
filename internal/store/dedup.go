package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/sluicehq/sluice/internal/defaults"
)

// IDSet is the set of message ids of one agent that are in the store.
//
// Agents number messages contiguously (an id is a spool position), so the
// set is kept as a watermark below which every id is stored, plus the
// stored ids above it as sorted runs of consecutive ids. Ids arrive mostly
// in order, so there are few runs: none in the steady state, and one more
// per gap, such as a message the sink rejected, which stays a gap until
// the message is stored.
type IDSet struct {
	// wm: every id below it is stored. Invariant: wm is not stored
	// (otherwise it would have advanced).
	wm uint64
	// runs are disjoint, sorted, separated by at least one missing id,
	// and all above wm: wm < runs[0].first, runs[i].last+1 < runs[i+1].first.
	runs []run
}

type run struct{ first, last uint64 }

func (s *IDSet) has(id uint64) bool {
	if id < s.wm {
		return true
	}
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].last >= id })
	return i < len(s.runs) && s.runs[i].first <= id
}

// add records id as stored.
func (s *IDSet) add(id uint64) {
	if s.has(id) {
		return
	}
	if id == s.wm && id != math.MaxUint64 {
		s.wm++
		if len(s.runs) > 0 && s.runs[0].first == s.wm {
			s.wm = s.runs[0].last + 1 // last < MaxUint64: see below
			s.runs = s.runs[:copy(s.runs, s.runs[1:])]
		}
		return
	}
	// i is the first run entirely above id.
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].first > id })
	// id is not stored, so a run ending just below it has last < id <=
	// MaxUint64 and last+1 cannot wrap; likewise id < runs[i].first.
	left := i > 0 && s.runs[i-1].last+1 == id
	right := i < len(s.runs) && id+1 == s.runs[i].first
	switch {
	case left && right:
		s.runs[i-1].last = s.runs[i].last
		s.runs = append(s.runs[:i], s.runs[i+1:]...)
	case left:
		s.runs[i-1].last = id
	case right:
		s.runs[i].first = id
	default:
		s.runs = append(s.runs, run{})
		copy(s.runs[i+1:], s.runs[i:])
		s.runs[i] = run{id, id}
	}
	// A run that reaches MaxUint64 never merges into wm: wm stays below
	// it, so wm+1 never wraps.
}

// highest is the highest id in s; ok is false when s holds none.
func (s *IDSet) highest() (id uint64, ok bool) {
	if n := len(s.runs); n > 0 {
		return s.runs[n-1].last, true
	}
	if s.wm > 0 {
		return s.wm - 1, true
	}
	return 0, false
}

// settle records that no id below w will be added or asked about as new:
// the agent's watermark passed them (a sink acknowledged them, or the
// agent skipped them: set aside for good, lost to damage, or reserved by
// a run that did not stop cleanly). The ids below w that were never
// stored then count as stored, so their gaps stop costing a run each:
// without it, every gap an agent leaves (one per unclean restart under
// --spool-sync interval or none) would be kept for ever.
func (s *IDSet) settle(w uint64) {
	if w <= s.wm {
		return
	}
	i := 0
	for i < len(s.runs) && s.runs[i].last < w {
		i++
	}
	s.runs = s.runs[:copy(s.runs, s.runs[i:])]
	s.wm = w
	if len(s.runs) == 0 || s.runs[0].first > w {
		return
	}
	// The first run reaches w or past it: it joins the watermark, except
	// one that ends at MaxUint64, which never does (see add): the
	// watermark then stays just below it (not stored: runs are apart).
	r := s.runs[0]
	if r.last == math.MaxUint64 {
		s.wm = r.first - 1
		return
	}
	s.wm = r.last + 1
	s.runs = s.runs[:copy(s.runs, s.runs[1:])]
}

// Settle records that agent will never send an id below w again (its
// watermark, from its Hello): see IDSet.settle. Messages below w of which
// only some records were seen are dropped from pending: a sink
// acknowledged them, so they are whole somewhere. The caller holds the
// lock.
func (d *Dedup) Settle(agent string, w uint64) {
	if w == 0 {
		return
	}
	d.set(agent).settle(w)
	for k := range d.pending {
		if k.agent == agent && k.id < w {
			delete(d.pending, k)
		}
	}
}

// Runs is the number of gaps the index keeps, over all agents: what
// Settle bounds.
func (d *Dedup) Runs() int {
	n := 0
	for _, s := range d.agents {
		n += len(s.runs)
	}
	return n
}

// Dedup is the set of (agent id, message id) pairs in the store, and
// the store offset up to which it is complete. The storage writer and, with
// the Kafka store, the tailer share it under mu.
type Dedup struct {
	sync.Mutex
	agents map[string]*IDSet
	// Next: the index reflects every store record below this offset
	// (embedded store only).
	Next uint64
	// pending are messages of which some records were seen in the Kafka
	// topic, but not all yet (nil for the embedded store, whose messages
	// are one record). Keyed by (agent, message id).
	pending map[dedupKey]*pendingMsg
}

// pendingMsg tracks the record indexes of one message seen in Kafka.
type pendingMsg struct {
	count uint32 // records in the message (the sluice-count header)
	seen  IDSet  // indexes seen; complete once seen.wm == count
}

func NewDedup() *Dedup { return &Dedup{agents: make(map[string]*IDSet)} }

// add records (agent, id) as stored, forgetting any partial state of it.
func (d *Dedup) Add(agent string, id uint64) {
	d.set(agent).add(id)
	if len(d.pending) > 0 {
		delete(d.pending, dedupKey{agent, id})
	}
}

// observe records that record idx of count records of message (agent,
// id) is in the store. A message is stored once every index in [0, count)
// was observed. fresh reports whether the record was not known before.
// Records with idx >= count are ignored (and not fresh).
func (d *Dedup) Observe(agent []byte, id uint64, idx, count uint32) (fresh bool) {
	if idx >= count {
		return false
	}
	if s := d.agents[string(agent)]; s != nil && s.has(id) {
		if len(d.pending) > 0 {
			delete(d.pending, dedupKey{string(agent), id})
		}
		return false
	}
	if count == 1 {
		d.Add(string(agent), id)
		return true
	}
	if d.pending == nil {
		d.pending = make(map[dedupKey]*pendingMsg)
	}
	p := d.pending[dedupKey{string(agent), id}]
	if p == nil {
		p = &pendingMsg{count: count}
		d.pending[dedupKey{string(agent), id}] = p
	}
	if p.seen.has(uint64(idx)) {
		return false
	}
	p.seen.add(uint64(idx))
	if p.seen.wm >= uint64(p.count) {
		d.Add(string(agent), id)
	}
	return true
}

func (d *Dedup) set(agent string) *IDSet {
	s := d.agents[agent]
	if s == nil {
		s = &IDSet{}
		d.agents[agent] = s
	}
	return s
}

// Highest is the highest id of agent's that the index holds (stored, or
// settled below a watermark); ok is false when it holds none. The caller
// holds the lock.
func (d *Dedup) Highest(agent string) (id uint64, ok bool) {
	if s := d.agents[agent]; s != nil {
		return s.highest()
	}
	return 0, false
}

func (d *Dedup) Has(agent string, id uint64) bool {
	s := d.agents[agent]
	return s != nil && s.has(id)
}

// MaxAgentID is the longest agent id, in bytes.
const MaxAgentID = defaults.MaxAgentIDLen

// Agents is the number of agents the index knows.
func (d *Dedup) Agents() int { return len(d.agents) }

// PendingMessages is the number of messages of which only some records
// were seen.
func (d *Dedup) PendingMessages() int { return len(d.pending) }

// Checkpoint format, inside a seglog metadata file (which adds a length and
// a CRC), integers little-endian:
//
//	"SDC" version(1)
//	next    u64     store offset the checkpoint reflects everything below
//	agents  u32
//	per agent, in no particular order:
//	  len u16, agent id, wm u64, runs u32, runs × (first u64, last u64)
const (
	checkpointMagic   = "SDC"
	checkpointVersion = 1
)

// ErrCheckpoint wraps every reason a checkpoint is refused.
var ErrCheckpoint = errors.New("bad dedup checkpoint")

// AppendCheckpoint appends the index's checkpoint to dst. The caller
// holds the lock.
func (d *Dedup) AppendCheckpoint(dst []byte) []byte {
	dst = append(dst, checkpointMagic...)
	dst = append(dst, checkpointVersion)
	dst = binary.LittleEndian.AppendUint64(dst, d.Next)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(d.agents)))
	for agent, s := range d.agents {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(agent)))
		dst = append(dst, agent...)
		dst = appendIDSet(dst, s)
	}
	return dst
}

// appendIDSet encodes s: wm u64, runs u32, runs × (first u64, last u64).
func appendIDSet(dst []byte, s *IDSet) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, s.wm)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.runs)))
	for _, r := range s.runs {
		dst = binary.LittleEndian.AppendUint64(dst, r.first)
		dst = binary.LittleEndian.AppendUint64(dst, r.last)
	}
	return dst
}

// readIDSet decodes what appendIDSet wrote at the start of b, checking the
// invariants, and returns the rest of b.
func readIDSet(b []byte) (*IDSet, []byte, error) {
	if len(b) < 12 {
		return nil, nil, errors.New("truncated id set")
	}
	s := &IDSet{wm: binary.LittleEndian.Uint64(b)}
	nr := binary.LittleEndian.Uint32(b[8:12])
	b = b[12:]
	if uint64(nr)*16 > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%d runs do not fit", nr)
	}
	s.runs = make([]run, nr)
	for j := range s.runs {
		r := run{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
		b = b[16:]
		// Runs lie above wm and leave a gap after the previous run
		// (add's one exception: the id MaxUint64 at wm MaxUint64).
		ok := r.first <= r.last
		if j == 0 {
			ok = ok && (r.first > s.wm || r.first == math.MaxUint64)
		} else {
			ok = ok && r.first > s.runs[j-1].last && r.first-s.runs[j-1].last >= 2
		}
		if !ok {
			return nil, nil, fmt.Errorf("run %d out of order", j)
		}
		s.runs[j] = r
	}
	return s, b, nil
}

// ParseCheckpoint decodes a checkpoint, checking every invariant, so that a
// damaged one is refused rather than trusted.
func ParseCheckpoint(b []byte) (*Dedup, error) {
	d, rest, err := readCheckpoint(b)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrCheckpoint, len(rest))
	}
	return d, nil
}

// readCheckpoint decodes the checkpoint at the start of b and returns the
// rest of b.
func readCheckpoint(b []byte) (*Dedup, []byte, error) {
	bad := func(format string, args ...any) (*Dedup, []byte, error) {
		return nil, nil, fmt.Errorf("%w: %s", ErrCheckpoint, fmt.Sprintf(format, args...))
	}
	if len(b) < 16 || string(b[:3]) != checkpointMagic || b[3] != checkpointVersion {
		return bad("bad header")
	}
	d := NewDedup()
	d.Next = binary.LittleEndian.Uint64(b[4:12])
	n := binary.LittleEndian.Uint32(b[12:16])
	b = b[16:]
	for i := uint32(0); i < n; i++ {
		if len(b) < 2 {
			return bad("truncated at agent %d", i)
		}
		l := int(binary.LittleEndian.Uint16(b))
		if l == 0 || l > MaxAgentID || len(b) < 2+l+12 {
			return bad("agent %d: bad or truncated id", i)
		}
		agent := string(b[2 : 2+l])
		s, rest, err := readIDSet(b[2+l:])
		if err != nil {
			return bad("agent %q: %v", agent, err)
		}
		b = rest
		if _, dup := d.agents[agent]; dup {
			return bad("agent %q listed twice", agent)
		}
		d.agents[agent] = s
	}
	return d, b, nil
}

// AppendPending appends the messages of which only some records were seen
// (the Kafka store's checkpoint keeps them): u32 count, then per message
// agent (u16 length, id), message id u64, count u32, indexes seen (an id
// set).
func (d *Dedup) AppendPending(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(d.pending)))
	for key, p := range d.pending {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(key.agent)))
		dst = append(dst, key.agent...)
		dst = binary.LittleEndian.AppendUint64(dst, key.id)
		dst = binary.LittleEndian.AppendUint32(dst, p.count)
		dst = appendIDSet(dst, &p.seen)
	}
	return dst
}

// ReadPending decodes what AppendPending wrote at the start of b into d and
// returns the rest of b.
func (d *Dedup) ReadPending(b []byte) ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: %s", ErrCheckpoint, fmt.Sprintf(format, args...))
	}
	if len(b) < 4 {
		return bad("truncated pending messages")
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	for i := uint32(0); i < n; i++ {
		if len(b) < 2 {
			return bad("truncated at pending message %d", i)
		}
		al := int(binary.LittleEndian.Uint16(b))
		if al == 0 || al > MaxAgentID || len(b) < 2+al+12 {
			return bad("pending message %d: bad or truncated agent id", i)
		}
		key := dedupKey{agent: string(b[2 : 2+al]), id: binary.LittleEndian.Uint64(b[2+al:])}
		p := &pendingMsg{count: binary.LittleEndian.Uint32(b[2+al+8:])}
		s, rest, err := readIDSet(b[2+al+12:])
		if err != nil {
			return bad("pending message %d: %v", i, err)
		}
		b = rest
		p.seen = *s
		if p.count < 2 || p.seen.wm >= uint64(p.count) || (len(p.seen.runs) > 0 && p.seen.runs[len(p.seen.runs)-1].last >= uint64(p.count)) {
			return bad("pending message %d: indexes do not fit its count", i)
		}
		if d.pending == nil {
			d.pending = make(map[dedupKey]*pendingMsg)
		}
		if _, dup := d.pending[key]; dup {
			return bad("pending message %d listed twice", i)
		}
		d.pending[key] = p
	}
	return b, nil
}

// dedupKey names one message.
type dedupKey struct {
	agent string
	id    uint64
}
