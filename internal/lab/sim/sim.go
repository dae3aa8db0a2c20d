// Package sim runs the real agent (spool, ingest, driver, delivery.Sender)
// against the real sink (sessions, storage writer, dedup, seglog store)
// in one process, connected by memconn with seeded faults: dropped,
// duplicated, held back (reordered or delayed) frames, reset sessions,
// and crashes of either process. One seed fixes the workload, the fault
// rates, every per-frame fault and the crash points; docs/simulation.md
// says what is real, what is simulated and how to replay a seed.
//
// After the run it checks: every record the agent accepted (IngestMessage
// returned nil, so it was fsynced to the spool) is in the sink's store
// exactly once, under one (agent id, message id) that is itself stored
// once, with the same content; nothing else is stored. In half the seeds
// some messages are poison: the sink's side of the transport replaces
// their payload with bytes that are no batch, so the sink refuses them
// for good on every send; those must never be stored, and must end up in
// the agent's dead-letter log (the agent sets refused messages aside at
// once here: agent.Config.SetAsideAt 1).
package sim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/internal/transport/memconn"
	"github.com/sluicehq/sluice/seglog"
)

// Options bound one run.
type Options struct {
	// Dir is where the run's spool and data directories go (a fresh
	// subdirectory is made and removed); /dev/shm keeps fsyncs cheap.
	Dir string
	// Budget bounds the wait for delivery once the faults stop. It is an
	// upper bound for a stuck run, not a measurement: a healthy run
	// converges in milliseconds.
	Budget time.Duration
	Logger *slog.Logger
}

// Result is what one seed did.
type Result struct {
	Seed                      uint64
	Messages, Records         int
	AgentCrashes, SinkCrashes int
	Faults                    memconn.FaultStats
	Stored                    int // store records at the end, duplicates included
	Compressed                int // of them, stored zstd-compressed
	// KafkaSinks is how many of the sink's starts asked for Kafka
	// records sections; KafkaSent how many messages the agent sent as
	// such (the sink converts them for its embedded store).
	KafkaSinks, KafkaSent int
	// Poison is how many messages the sink was made to refuse for good;
	// SetAside how many letters the agent's dead-letter log holds (a
	// message set aside twice, after a crash between the copy and the
	// watermark, counts twice).
	Poison, SetAside int
	// PowerCuts is how many of the agent's crashes were machine crashes
	// (seeds whose agent runs with --spool-sync none): its spool cut
	// back to what a power failure may leave. Skipped counts the ids the
	// restarted spools skipped (reserved by the run before).
	PowerCuts, Skipped int
	Elapsed            time.Duration
}

// plan is everything drawn from the seed before the run starts.
type plan struct {
	messages    int
	compression codec.Kind
	faults      memconn.Faults
	pAgentCrash float64
	pSinkCrash  float64
	pPause      float64
	kafka       kafkaAsk
	pPoison     float64
	// powerCuts: the agent runs with SyncNone and each of its crashes is
	// a machine crash that loses an unsynced tail of its spool.
	powerCuts bool
}

// kafkaAsk is whether the sink asks the agent for Kafka records sections
// (sink.Config.AskKafkaRecords): never, at every start, or at each start
// by a coin's flip, so that a restarted sink stops or starts asking while
// the agent's spool holds messages sealed either way (the write loop then
// sends a sealed section as zstd to a sink that did not ask).
type kafkaAsk int

const (
	kafkaNever kafkaAsk = iota
	kafkaAlways
	kafkaFlip
)

func newPlan(rng *rand.Rand) plan {
	return plan{
		messages:    10 + rng.IntN(41),
		compression: []codec.Kind{codec.Plain, codec.Zstd}[rng.IntN(2)],
		faults: memconn.Faults{
			Drop: rng.Float64() * 0.08, Dup: rng.Float64() * 0.08, Hold: rng.Float64() * 0.15,
			HoldFrames: 1 + rng.IntN(4), HoldFor: time.Duration(1+rng.IntN(5)) * time.Millisecond,
			DisconnectEvery: []int{0, 10, 30, 100}[rng.IntN(4)],
		},
		pAgentCrash: []float64{0, 0.02, 0.06}[rng.IntN(3)],
		pSinkCrash:  []float64{0, 0.02, 0.06}[rng.IntN(3)],
		pPause:      0.3,
	}
}

// world is one run: the two processes and what has been produced.
type world struct {
	seed   uint64
	opts   Options
	rng    *rand.Rand
	dir    string
	fd     *memconn.FaultDialer
	svc    *service
	agent  *agent.Agent
	sink   *sink.Sink
	disk   *disk
	agentD string
	sinkD  string
	// produced: record content → the message it went in (index of the
	// IngestMessage call), for the report.
	produced map[string]int
	res      Result
	plan     plan
	dec      *codec.Decoder
	// krng draws the Kafka ask at each sink start, apart from rng so
	// that the seeds' other draws are as before the ask existed; prng
	// draws the poison messages, for the same reason.
	krng      *rand.Rand
	prng      *rand.Rand
	kafkaSent atomic.Int64
	// poisoned: record content → message index, of the poison messages.
	poisoned map[string]int
	// poisonIDs are the poison messages' ids.
	poisonIDs map[uint64]bool
	// mayLose: records accepted before the last power cut (powerCuts),
	// which the cut may have taken with the spool's unsynced tail. They
	// may be missing from the store, never stored twice; every record
	// accepted after the last cut must be stored.
	mayLose map[string]bool
	// seg is the spool's active segment at the agent's start and its
	// size then: what a power cut cannot take (Open synced it).
	seg      string
	segFloor int64
}

// The categories of a broken invariant. A failing seed's error is a
// *Violation (its text starts "INVARIANT <category>:") or a
// *BudgetExceeded (it starts "BUDGET exceeded:"): scripts/mutate.sh counts a
// mutant killed only on its own category, never on a budget, because a
// healthy seed on a loaded machine can be slow but never breaks one.
const (
	// InvariantDuplicated: a record, or an (agent id, message id), is
	// stored twice.
	InvariantDuplicated = "duplicated"
	// InvariantCorrupted: the store holds a record nobody accepted, or one
	// whose content or codec differs from what was accepted.
	InvariantCorrupted = "corrupted"
	// InvariantAckedBeforeDurable: the agent holds every message as
	// acknowledged (its persisted watermark, which never leads the acks,
	// reached the end of its spool), yet accepted records are missing from
	// the store: the sink acknowledged what it then lost, and nothing will
	// ever resend it. No waiting decides this, so it is never a budget.
	InvariantAckedBeforeDurable = "acked-before-durable"
	// InvariantLost: the agent's watermark passed a message that is
	// neither stored nor in its dead-letter log.
	InvariantLost = "lost"
	// InvariantIDReused: after a power cut of an agent that sends before
	// it fsyncs, a record accepted after the cut is acknowledged but not
	// stored: its message took the id of a lost one the sink held, and
	// the sink dropped it as a duplicate.
	InvariantIDReused = "id-reused"
)

// Violation is an invariant a seed broke.
type Violation struct {
	Category string // one of the Invariant* constants
	Detail   string
}

func (v *Violation) Error() string { return "INVARIANT " + v.Category + ": " + v.Detail }

func violation(category, format string, args ...any) error {
	return &Violation{Category: category, Detail: fmt.Sprintf(format, args...)}
}

// BudgetExceeded is a seed that did not converge within Options.Budget
// after the faults stopped, without breaking an invariant: the agent still
// holds unacknowledged messages. A lost resend timer looks like this, and
// so does a healthy seed on a machine too loaded for the budget, so it
// never counts as a mutant's kill.
type BudgetExceeded struct {
	Budget time.Duration
	Detail string
}

func (b *BudgetExceeded) Error() string {
	return fmt.Sprintf("BUDGET exceeded: no convergence within %v after the faults stopped: %s", b.Budget, b.Detail)
}

// Run runs one seed and returns an error describing the first invariant
// it broke (a *Violation), a *BudgetExceeded, or another error (the run
// itself failed: a sink that would not start, an ingest refused).
func Run(seed uint64, opts Options) (res Result, err error) {
	start := time.Now()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Budget == 0 {
		opts.Budget = 20 * time.Second
	}
	dir, err := os.MkdirTemp(opts.Dir, fmt.Sprintf("sim-%d-", seed))
	if err != nil {
		return Result{Seed: seed}, err
	}
	defer os.RemoveAll(dir)
	w := &world{
		seed: seed, opts: opts, rng: rand.New(rand.NewPCG(seed, 0x5eed)), dir: dir,
		agentD: filepath.Join(dir, "spool"), sinkD: filepath.Join(dir, "data"),
		produced: map[string]int{}, res: Result{Seed: seed},
		poisoned: map[string]int{}, poisonIDs: map[uint64]bool{}, mayLose: map[string]bool{},
	}
	defer func() {
		w.stop()
		w.res.Elapsed = time.Since(start)
		w.res.KafkaSent = int(w.kafkaSent.Load())
		res = w.res
	}()
	p := newPlan(w.rng)
	w.krng = rand.New(rand.NewPCG(seed, 0xca7ca))
	w.prng = rand.New(rand.NewPCG(seed, 0xdead1e77e5))
	if w.prng.IntN(2) == 0 {
		p.pPoison = 0.05 + 0.15*w.prng.Float64()
	}
	// A third of the seeds, from a generator of their own, cut the
	// agent's power instead of killing it. Without poison: a poison
	// message lost in a cut would be in no dead-letter log, rightly.
	if rand.New(rand.NewPCG(seed, 0x90e4c07)).IntN(3) == 0 {
		p.powerCuts, p.pPoison = true, 0
	}
	if p.compression == codec.Zstd {
		// The agent seals Kafka records only when it compresses with zstd.
		p.kafka = kafkaAsk(w.krng.IntN(3))
	}
	w.plan, w.dec = p, codec.NewDecoder(1<<20)
	w.svc = &service{kafkaSent: &w.kafkaSent, poison: map[uint64]bool{}}
	w.fd = &memconn.FaultDialer{Inner: &memconn.Dialer{Service: w.svc}, Seed: seed, Faults: p.faults}
	if err := w.startSink(); err != nil {
		return w.res, err
	}
	if err := w.startAgent(); err != nil {
		return w.res, err
	}
	ctx := context.Background()
	for i := range p.messages {
		recs := make([][]byte, 1+w.rng.IntN(3))
		for j := range recs {
			// Unique per seed and position, with a seeded filler so sizes vary.
			r := fmt.Sprintf("s%d/m%d/r%d/", seed, i, j) + strings.Repeat("x", w.rng.IntN(200))
			recs[j] = []byte(r)
		}
		poison := p.pPoison > 0 && w.prng.Float64() < p.pPoison
		if poison {
			// Ingest is sequential and one call is one message, so its
			// id is the spool's next; it is poison before it can be sent.
			id := w.agent.SpoolNext()
			w.poisonIDs[id] = true
			w.svc.setPoison(id)
			w.res.Poison++
		}
		if err := w.agent.IngestMessage(ctx, recs); err != nil {
			return w.res, fmt.Errorf("message %d: ingest: %w", i, err)
		}
		for _, r := range recs {
			if poison {
				w.poisoned[string(r)] = i
			} else {
				w.produced[string(r)] = i
			}
		}
		w.res.Messages++
		w.res.Records += len(recs)
		// Crashes come between ingest calls: a record is accepted once
		// IngestMessage returned, and then it is fsynced in the spool.
		if w.rng.Float64() < p.pAgentCrash {
			crash := w.crashAgent
			if p.powerCuts {
				crash = w.powerCut
			}
			if err := crash(); err != nil {
				return w.res, err
			}
		}
		if w.rng.Float64() < p.pSinkCrash {
			if err := w.crashSink(); err != nil {
				return w.res, err
			}
		}
		if w.rng.Float64() < p.pPause {
			time.Sleep(time.Duration(w.rng.IntN(3000)) * time.Microsecond)
		}
	}
	w.fd.Calm()
	w.res.Faults = w.fd.Stats()
	return w.res, w.settle()
}

// settle waits until the agent holds every message as acknowledged, then
// checks the store.
func (w *world) settle() error {
	deadline := time.Now().Add(w.opts.Budget)
	next := w.agent.SpoolNext() // ingest is over: fixed from here on
	for {
		// The watermark first, the store after: everything acknowledged
		// by the time of the read is stored (the sink acks after Append
		// returned), so the store read later holds it.
		acked := w.agent.AckedWatermark() >= next
		complete, err := w.check(false)
		if err != nil {
			return err // a duplicate or a stray record: no need to wait
		}
		if acked {
			_, err := w.check(true)
			if m := (*missingError)(nil); errors.As(err, &m) {
				if w.plan.powerCuts && w.res.PowerCuts > 0 {
					return violation(InvariantIDReused, "every message is acknowledged after %d power cuts, but %v", w.res.PowerCuts, err)
				}
				return violation(InvariantAckedBeforeDurable, "every message is acknowledged, but %v", err)
			}
			if err != nil {
				return err
			}
			return w.checkDeadLetters()
		}
		if time.Now().After(deadline) {
			st := w.agent.Progress()
			detail := fmt.Sprintf("the agent still has %d unacknowledged (acknowledged up to %d of %d, state %s)",
				st.Unacked, w.agent.AckedWatermark(), next, st.State)
			if !complete {
				if _, err := w.check(true); err != nil {
					detail += "; " + err.Error()
				}
			}
			return &BudgetExceeded{Budget: w.opts.Budget, Detail: detail}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// missingError is check's report of accepted records not in the store:
// whether that breaks an invariant depends on whether the agent still
// holds them (settle decides).
type missingError struct{ msg string }

func (e *missingError) Error() string { return e.msg }

// check reads the whole store. It returns an error for a record stored
// twice, a (agent, id) stored twice, a record nobody produced or one whose
// content differs; with final set, also for a produced record missing.
func (w *world) check(final bool) (complete bool, err error) {
	type key struct {
		agent string
		id    uint64
	}
	ids := map[key]uint64{}
	seen := map[string]uint64{}
	it := w.sink.Store().NewIterator(0, 1<<20)
	stored, compressed := 0, 0
	for it.Next() {
		stored++
		off := it.Offset()
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			return false, violation(InvariantCorrupted, "store offset %d: %v", off, err)
		}
		k := key{string(m.AgentID), m.MessageID}
		if prev, ok := ids[k]; ok {
			return false, violation(InvariantDuplicated, "message %s/%d stored twice, at offsets %d and %d", k.agent, k.id, prev, off)
		}
		ids[k] = off
		if m.Codec != codec.Plain && m.Codec != w.plan.compression {
			return false, violation(InvariantCorrupted, "store offset %d: codec %v, the agent compresses with %v", off, m.Codec, w.plan.compression)
		}
		if m.Codec != codec.Plain {
			compressed++
		}
		body, err := w.dec.Decode(nil, m.Body, m.Codec, m.DictID)
		if err != nil {
			return false, violation(InvariantCorrupted, "store offset %d: %v", off, err)
		}
		err = batch.Decode(body, func(rec []byte) error {
			r := string(rec)
			if i, ok := w.poisoned[r]; ok {
				return violation(InvariantCorrupted, "store offset %d holds a record of poison message %d, which the sink refused for good", off, i)
			}
			if _, ok := w.produced[r]; !ok {
				return violation(InvariantCorrupted, "store offset %d holds a record never accepted: %.60q", off, r)
			}
			if prev, ok := seen[r]; ok {
				return violation(InvariantDuplicated, "record %.40q stored twice, at offsets %d and %d", r, prev, off)
			}
			seen[r] = off
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	if err := it.Err(); err != nil {
		return false, fmt.Errorf("read store: %w", err)
	}
	w.res.Stored, w.res.Compressed = stored, compressed
	missing, example := 0, ""
	for r, i := range w.produced {
		if _, ok := seen[r]; !ok && !w.mayLose[r] {
			if missing == 0 {
				example = fmt.Sprintf("%.40q of message %d", r, i)
			}
			missing++
		}
	}
	if missing == 0 {
		return true, nil
	}
	if final {
		return false, &missingError{fmt.Sprintf("%d of %d accepted records missing from the store (%d accepted before a power cut are not counted), e.g. %s",
			missing, len(w.produced), len(w.mayLose), example)}
	}
	return false, nil
}

// checkDeadLetters reads the agent's dead-letter log: every poison
// message must be in it (the watermark passed it, and it was never
// stored: set aside, or lost), once, and nothing else.
func (w *world) checkDeadLetters() error {
	got := map[uint64]bool{}
	err := deadletter.Read(filepath.Join(w.agentD, deadletter.Dir), func(l deadletter.Letter) error {
		if !w.poisonIDs[l.ID] {
			return violation(InvariantCorrupted, "message %d is in the dead-letter log, but the sink never refused it", l.ID)
		}
		if got[l.ID] {
			return violation(InvariantDuplicated, "message %d is in the dead-letter log twice", l.ID)
		}
		got[l.ID] = true
		w.res.SetAside++
		return nil
	})
	if err != nil {
		return err
	}
	for id := range w.poisonIDs {
		if !got[id] {
			return violation(InvariantLost, "poison message %d was acknowledged past, but is neither stored nor in the dead-letter log", id)
		}
	}
	return nil
}

func (w *world) startAgent() error {
	sync := seglog.SyncAlways()
	if w.plan.powerCuts {
		sync = seglog.SyncNone()
	}
	a, err := agent.New(agent.Config{
		Dialer: w.fd, SpoolDir: w.agentD, SpoolSync: sync,
		Compression: w.plan.compression, Linger: time.Millisecond,
		// Resends and reconnects at the pace of an in-memory path. The
		// progress deadline is off (an hour): it would reset a session
		// that lost a message and so hide a missing resend timer.
		MinRTO: 5 * time.Millisecond, ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond,
		HandshakeTimeout: 5 * time.Second, ProgressTimeout: time.Hour,
		SetAsideAt: 1, // poison is set aside at once: no seed fills a spool
		Logger:     w.opts.Logger,
	})
	if err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	w.agent = a
	if from, to := a.SkippedIDs(); to > from {
		w.res.Skipped += int(to - from)
	}
	w.seg, w.segFloor = activeSegment(filepath.Join(w.agentD, "log"))
	return nil
}

// activeSegment returns the path and size of the last segment in dir.
func activeSegment(dir string) (string, int64) {
	ents, _ := os.ReadDir(dir)
	last := ""
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".seg") && e.Name() > last {
			last = e.Name()
		}
	}
	if last == "" {
		return "", 0
	}
	fi, err := os.Stat(filepath.Join(dir, last))
	if err != nil {
		return "", 0
	}
	return filepath.Join(dir, last), fi.Size()
}

// powerCut stops the agent as a machine crash would under SyncNone: the
// spool's active segment keeps what its start synced and a seeded part
// of what was written since (segments sealed since are synced and kept);
// every record accepted so far may be gone.
// Files written by WriteMeta (the watermark, the id reservation) are
// fsynced and renamed: they keep their newest version, which a real cut
// may also leave.
func (w *world) powerCut() error {
	w.res.AgentCrashes++
	w.res.PowerCuts++
	w.fd.CutAll()
	logDir := filepath.Join(w.agentD, "log")
	seg, size := activeSegment(logDir)
	// Close syncs and lowers the id reservation (a clean stop); the cut
	// comes before it: the reservation file is put back as it was.
	reservation, rerr := os.ReadFile(filepath.Join(logDir, seglog.ReservationFile))
	if err := w.agent.Close(); err != nil {
		return fmt.Errorf("agent power cut: close: %w", err)
	}
	w.agent = nil
	if rerr == nil {
		if err := os.WriteFile(filepath.Join(logDir, seglog.ReservationFile), reservation, 0o644); err != nil {
			return fmt.Errorf("agent power cut: %w", err)
		}
	}
	floor := int64(0)
	if seg == w.seg {
		floor = w.segFloor
	}
	if seg != "" && size > floor {
		if err := os.Truncate(seg, floor+w.rng.Int64N(size-floor+1)); err != nil {
			return fmt.Errorf("agent power cut: %w", err)
		}
	}
	for r := range w.produced {
		w.mayLose[r] = true
	}
	return w.startAgent()
}

// crashAgent stops the agent and starts it again on the same spool.
// Close is used as the crash: everything accepted is already fsynced, and
// what Close adds (persisting the acknowledged watermark, which is only
// ever behind the truth) a crash right after a persist would have too.
func (w *world) crashAgent() error {
	w.res.AgentCrashes++
	w.fd.CutAll()
	if err := w.agent.Close(); err != nil {
		return fmt.Errorf("agent crash: close: %w", err)
	}
	w.agent = nil
	return w.startAgent()
}

func (w *world) startSink() error {
	w.disk = newDisk(w.sinkD)
	ask := w.plan.kafka == kafkaAlways || (w.plan.kafka == kafkaFlip && w.krng.IntN(2) == 0)
	if ask {
		w.res.KafkaSinks++
	}
	s, err := sink.New(sink.Config{
		DataDir: w.sinkD, Logger: w.opts.Logger, SegmentBytes: 64 << 10,
		ShutdownTimeout: 5 * time.Second, OnStoreSync: w.disk.synced,
		AskKafkaRecords: ask,
	})
	if err != nil {
		return fmt.Errorf("start sink: %w", err)
	}
	w.disk.synced() // what survived the last crash is on disk
	w.sink = s
	w.svc.set(s)
	return nil
}

// crashSink kills the sink: sessions are reset, and the data directory is
// put back to what it held at the crash: store segments cut to their size
// at the last fdatasync, every other file (checkpoint, dictionaries) as it
// was. The sink is closed in between only to release its goroutines and
// the directory lock; what Close writes is undone.
func (w *world) crashSink() error {
	w.res.SinkCrashes++
	w.fd.SetDown(true)
	w.svc.kill() // no session can ack any more
	durable := w.disk.snapshot()
	files, err := snapshotFiles(w.sinkD)
	if err != nil {
		return err
	}
	if err := w.sink.Close(); err != nil {
		return fmt.Errorf("sink crash: close: %w", err)
	}
	if err := restore(w.sinkD, durable, files); err != nil {
		return fmt.Errorf("sink crash: %w", err)
	}
	if err := w.startSink(); err != nil {
		return err
	}
	w.fd.SetDown(false)
	return nil
}

func (w *world) stop() {
	if w.fd != nil {
		w.fd.CutAll()
	}
	if w.agent != nil {
		w.agent.Close()
	}
	if w.sink != nil {
		w.svc.kill()
		w.sink.Close()
	}
}

// service is the sink as the dialer sees it: it can be swapped on a
// restart, and a crash resets every session and waits for its handler to
// return. (Sink.Close waits only for the gRPC server's handlers: a
// ServeSend still running over memconn when Close closes the writer's
// channel panics the sink, so the simulation ends them first.)
type service struct {
	mu sync.Mutex
	// poison holds the ids of the messages whose payload the sink is
	// made to see as no batch (under mu).
	poison map[uint64]bool
	s      *sink.Sink
	wg     sync.WaitGroup
	conns  map[protocol.Conn]struct{}
	// kafkaSent counts the messages received as Kafka records sections.
	kafkaSent *atomic.Int64
}

// kill refuses new sessions, resets the open ones and waits until their
// handlers have returned.
func (v *service) kill() {
	v.mu.Lock()
	v.s = nil
	for c := range v.conns {
		c.Close(protocol.Errorf(protocol.StatusUnavailable, "sim: sink crashed"))
	}
	v.mu.Unlock()
	v.wg.Wait()
}

func (v *service) set(s *sink.Sink) {
	v.mu.Lock()
	v.s = s
	v.mu.Unlock()
}

// get registers a session with the running sink; done unregisters it.
func (v *service) get(c protocol.Conn) (*sink.Sink, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.s == nil {
		return nil, protocol.Errorf(protocol.StatusUnavailable, "sim: sink is down")
	}
	if v.conns == nil {
		v.conns = map[protocol.Conn]struct{}{}
	}
	v.conns[c] = struct{}{}
	v.wg.Add(1)
	return v.s, nil
}

func (v *service) done(c protocol.Conn) {
	v.mu.Lock()
	delete(v.conns, c)
	v.mu.Unlock()
	v.wg.Done()
}

func (v *service) ServeSend(c protocol.Conn) error {
	s, err := v.get(c)
	if err != nil {
		return err
	}
	defer v.done(c)
	return s.ServeSend(&countingConn{Conn: c, kafka: v.kafkaSent, v: v})
}

func (v *service) setPoison(id uint64) {
	v.mu.Lock()
	v.poison[id] = true
	v.mu.Unlock()
}

func (v *service) isPoison(id uint64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.poison[id]
}

// countingConn counts the Kafka records messages a Send session
// receives, and is otherwise the session's conn (payload ownership too).
type countingConn struct {
	protocol.Conn
	kafka *atomic.Int64
	v     *service
}

func (c *countingConn) Recv() (protocol.Frame, error) {
	f, err := c.Conn.Recv()
	if m, ok := f.(*protocol.Message); ok {
		if m.Codec == protocol.CodecKafkaZstd {
			c.kafka.Add(1)
		}
		if c.v.isPoison(m.ID) {
			// What the sink sees of a poison message, on every send: a
			// body that is no batch, which it refuses for good.
			m.Payload, m.Codec, m.DictID = []byte("sim: poison, no batch"), protocol.CodecPlain, 0
		}
	}
	return f, err
}

func (c *countingConn) PayloadsOwned() bool {
	po, ok := c.Conn.(protocol.PayloadOwner)
	return ok && po.PayloadsOwned()
}

func (v *service) ServeRead(c protocol.Conn) error {
	s, err := v.get(c)
	if err != nil {
		return err
	}
	defer v.done(c)
	return s.ServeRead(c)
}

// disk tracks, for the sink's store, the size of every segment file at
// the last fdatasync: what a crash keeps.
type disk struct {
	dir  string
	mu   sync.Mutex
	size map[string]int64
}

func newDisk(dir string) *disk { return &disk{dir: dir, size: map[string]int64{}} }

// synced runs on the storage writer right after an fdatasync, before it
// writes anything else, so the segments' sizes are what was synced.
func (d *disk) synced() {
	sizes := map[string]int64{}
	filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(p, ".seg") {
			if fi, err := e.Info(); err == nil {
				sizes[p] = fi.Size()
			}
		}
		return nil
	})
	d.mu.Lock()
	d.size = sizes
	d.mu.Unlock()
}

func (d *disk) snapshot() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.size
}

// snapshotFiles reads every file of dir but the segments and the lock.
func snapshotFiles(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || strings.HasSuffix(p, ".seg") || e.Name() == dirlock.FileName {
			return nil
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // replaced meanwhile (an atomic metadata write)
		}
		files[p] = b
		return err
	})
	return files, err
}

// restore puts dir back: segments cut to their synced size (removed if
// they did not exist at the last sync), other files as in files (removed
// if created since).
func restore(dir string, segs map[string]int64, files map[string][]byte) error {
	return filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() == dirlock.FileName {
			return err
		}
		if strings.HasSuffix(p, ".seg") {
			n, ok := segs[p]
			if !ok {
				return os.Remove(p)
			}
			return os.Truncate(p, n)
		}
		b, ok := files[p]
		if !ok {
			return os.Remove(p)
		}
		return os.WriteFile(p, b, 0o644)
	})
}
