package delivery

// Deterministic simulation of agent → network → sink → storage.
//
// One seed fixes everything: the workload, the configurations, the network
// delays and every fault. A virtual clock advances from event to event
// (container/heap ordered by time, then by scheduling order), so a run is a
// pure function of its seed, and a failure is reproduced with
//
//	SLUICE_SIM_SEED=<seed> go test -run 'TestSimulation/<mode>' ./internal/delivery/
//
// The world:
//   - The agent: a spool (message sizes by id, and the persisted watermark,
//     both durable), a Sender and its driver: one timer at the Sender's
//     NextDeadline that steps Tick (the Sender keeps every deadline),
//     dialling on Dial, reading the spool for Send, persisting MarkAcked.
//     A crash loses the Sender, its deadlines and its stream; the
//     restarted agent builds a new Sender from the persisted watermark and
//     re-feeds every spooled id above it.
//   - The network: one stream per dial. In normal mode a stream is ordered
//     and reliable, like TCP, until it is reset: then everything in flight
//     on it in either direction is lost and each end notices after a
//     delay. Adversarial mode also drops, duplicates and reorders single
//     messages on a stream (never Hello or Welcome, which a real stream
//     could not duplicate), to stress the machines beyond what TCP allows;
//     its agent driver also fires its timer early now and then, steps
//     Timeout events for some ArmTimers, late and whether or not they are
//     stale (the Tick-free protocol, mixed in), and runs a watchdog that
//     resets a stream with nothing in flight that makes no progress for a
//     second, since a stream that can lose a Grant can starve (a real one
//     cannot).
//   - Poison: in half the seeds a message now and then is larger than the
//     sink takes (the Receiver refuses it for good), and the Sender parks
//     it. The driver sets parked messages aside a little later, as the
//     agent does when its spool needs the room: it copies the message to
//     a durable dead-letter log, then steps SetAside. A crash may come in
//     between (the message is then refused and set aside again).
//   - The sink: one Receiver per stream and a storage writer doing group
//     commit: the first write opens a batch, committed a few ms later,
//     then Stored per stream. Storage deduplicates by id but counts every
//     write. It may stall. A sink crash loses the streams, the queues and
//     the open batch; storage persists.
//
// Safety, checked as the run goes: the watermark only grows and never
// passes an id that is neither durably stored nor durably set aside; a
// poison message is never stored; every Send is for an id still in
// the spool; Sender and Receiver invariants (checkInvariants) hold after
// every Step; a well-behaved agent never makes the sink Fail a stream.
// Liveness, checked at the end: faults stop after a few virtual seconds,
// and then every spooled id must be stored and the watermark must reach
// the end within the step and time budgets.

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

type simMode int

const (
	simNormal simMode = iota
	simAdversarial
)

func (m simMode) String() string { return [...]string{"normal", "adversarial"}[m] }

const (
	sec          = int64(time.Second)
	simMaxSteps  = 3_000_000
	simTailLimit = 60 * sec // after the last fault, to converge
	faultEvery   = 20 * ms
)

func TestSimulation(t *testing.T) {
	counts := map[simMode]int{simNormal: 300, simAdversarial: 200}
	if v := os.Getenv("SLUICE_SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SLUICE_SIM_SEEDS=%q: %v", v, err)
		}
		counts[simNormal], counts[simAdversarial] = n, n
	} else if testing.Short() {
		counts[simNormal], counts[simAdversarial] = 30, 20
	}
	var only []uint64
	if v := os.Getenv("SLUICE_SIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_SIM_SEED=%q: %v", v, err)
		}
		only = []uint64{seed}
	}
	for _, mode := range []simMode{simNormal, simAdversarial} {
		t.Run(mode.String(), func(t *testing.T) {
			seeds := only
			for seed := range uint64(counts[mode]) {
				if only == nil {
					seeds = append(seeds, seed)
				}
			}
			results := runSims(seeds, mode)
			var total simStats
			for _, r := range results { // in seed order: the lowest failing seed is reported
				if r.err != nil {
					t.Fatalf("seed %d: %v\n(reproduce: SLUICE_SIM_SEED=%d go test -run 'TestSimulation/%v' ./internal/delivery/)",
						r.seed, r.err, r.seed, mode)
				}
				total.add(r.stats)
			}
			t.Logf("%d seeds: %+v", len(results), total)
		})
	}
}

type simResult struct {
	seed  uint64
	err   error
	stats simStats
}

// runSims runs the seeds on all CPUs; each run is single-threaded and
// deterministic, so running them in parallel changes nothing but time.
func runSims(seeds []uint64, mode simMode) []simResult {
	results := make([]simResult, len(seeds))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s := newSim(seeds[i], mode)
				err := s.run()
				results[i] = simResult{seeds[i], err, s.stats}
			}
		}()
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

type simStats struct {
	Msgs, Steps, Resets, AgentCrashes, SinkCrashes, Stalls int
	Sent, Resent, Timeouts, Rejected                       uint64
	DuplicateWrites                                        int
	Poison, SetAside                                       int
}

func (a *simStats) add(b simStats) {
	a.Msgs += b.Msgs
	a.Steps += b.Steps
	a.Resets += b.Resets
	a.AgentCrashes += b.AgentCrashes
	a.SinkCrashes += b.SinkCrashes
	a.Stalls += b.Stalls
	a.Sent += b.Sent
	a.Resent += b.Resent
	a.Timeouts += b.Timeouts
	a.Rejected += b.Rejected
	a.DuplicateWrites += b.DuplicateWrites
	a.Poison += b.Poison
	a.SetAside += b.SetAside
}

type simEvent struct {
	at, seq int64
	fn      func()
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simConn is one stream.
type simConn struct {
	alive    bool
	recv     *Receiver // nil until Hello arrives, and after a sink crash
	welcomed bool      // the agent saw Welcome
	// Latest delivery time scheduled in each direction: a stream is FIFO.
	lastToSink, lastToAgent int64
}

type simWrite struct {
	c    *simConn
	id   uint64
	size int64
}

type sim struct {
	seed  uint64
	mode  simMode
	rng   *rand.Rand
	now   int64
	seq   int64
	q     simQueue
	err   error
	stats simStats

	// Drawn from the seed.
	total                int
	faultsEnd            int64
	delayMin, delaySpan  int64
	commitMin, commitMax int64
	commitBatch          int // most writes per commit; the rest wait for the next
	ingestGap            int64
	pReset, pAgentCrash  float64
	pSinkCrash, pStall   float64
	pDrop, pDup          float64
	scfg                 SenderConfig
	rcfg                 ReceiverConfig

	// The agent's durable state.
	spool     []int64 // size by id
	persisted uint64  // the watermark persisted by MarkAcked
	// deadLetters counts the durable copies of each message set aside.
	deadLetters map[uint64]int

	// pPoison is the share of spooled messages larger than the sink
	// takes; poison marks them.
	pPoison float64
	poison  map[uint64]bool
	// setAsideArmed: a set-aside of the parked messages is scheduled.
	setAsideArmed bool

	// The agent process.
	agentUp bool
	inc     int // incarnation; a crash bumps it, orphaning timers and dials
	sender  *Sender
	conn    *simConn // the stream dialled last
	// The driver's one timer: armed at wakeAt; wakeGen orphans the
	// superseded ones.
	wakeArmed bool
	wakeAt    int64
	wakeGen   int
	progress  int64 // when the watermark last moved or a stream came up

	// The sink process.
	sinkUp          bool
	conns           []*simConn
	pending         []simWrite // the open group-commit batch
	commitScheduled bool
	stallUntil      int64

	// The sink's durable storage: id → number of writes (before dedup).
	stored map[uint64]int
}

func newSim(seed uint64, mode simMode) *sim {
	rng := rand.New(rand.NewPCG(seed, 0x5111ce))
	s := &sim{seed: seed, mode: mode, rng: rng, stored: map[uint64]int{},
		deadLetters: map[uint64]int{}, poison: map[uint64]bool{}}
	s.total = 200 + rng.IntN(800)
	s.faultsEnd = 2*sec + rng.Int64N(6*sec)
	s.ingestGap = 2 * s.faultsEnd / int64(s.total)
	s.delayMin = ms/10 + rng.Int64N(2*ms)
	s.delaySpan = 1 + rng.Int64N(10*ms)
	s.commitMin = ms / 2
	s.commitMax = s.commitMin + 1 + rng.Int64N(10*ms)
	s.commitBatch = 1 + rng.IntN(64)
	f := 0.2 + 3*rng.Float64() // fault intensity of this seed
	s.pReset, s.pAgentCrash, s.pSinkCrash, s.pStall = 0.01*f, 0.002*f, 0.002*f, 0.004*f
	if mode == simAdversarial {
		s.pDrop, s.pDup = 0.02*f, 0.02*f
	}
	qb := 4<<10 + rng.Int64N(60<<10)
	s.rcfg = ReceiverConfig{QueueMsgs: 1 + rng.IntN(32), QueueBytes: qb, MaxMessageBytes: 3 * qb}
	minRTO := 10*time.Millisecond + time.Duration(rng.Int64N(90*ms))
	s.scfg = SenderConfig{
		InitialRTO:   200 * time.Millisecond,
		MinRTO:       minRTO,
		MaxRTO:       2 * time.Second,
		ReconnectMin: 5*time.Millisecond + time.Duration(rng.Int64N(50*ms)),
		ReconnectMax: 500 * time.Millisecond,
	}
	switch rng.IntN(3) {
	case 0: // auto window
	case 1:
		s.scfg.MaxInFlightMsgs = 1 + rng.IntN(64)
	case 2:
		s.scfg.MaxInFlightMsgs = rng.IntN(64)
		s.scfg.MaxInFlightBytes = 1<<10 + rng.Int64N(128<<10)
	}
	if rng.IntN(2) == 0 {
		s.pPoison = 0.005 + 0.03*rng.Float64()
	}
	return s
}

func (s *sim) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("t=%v: %s", time.Duration(s.now), fmt.Sprintf(format, args...))
	}
}

func (s *sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.q, simEvent{at: max(t, s.now), seq: s.seq, fn: fn})
}

func (s *sim) delay() int64 { return s.delayMin + s.rng.Int64N(s.delaySpan) }

func (s *sim) faulty() bool { return s.now < s.faultsEnd }

func (s *sim) run() error {
	s.sinkUp = true
	s.startAgent()
	s.at(0, s.ingest)
	s.at(faultEvery, s.faultTick)
	if s.mode == simAdversarial {
		s.at(200*ms, s.watchdog)
	}
	for s.err == nil && !s.done() {
		switch {
		case len(s.q) == 0:
			s.fail("no events left: deadlock; %s", s.describe())
		case s.stats.Steps >= simMaxSteps || s.now > s.faultsEnd+simTailLimit:
			s.fail("no convergence after %d steps; %s", s.stats.Steps, s.describe())
		default:
			ev := heap.Pop(&s.q).(simEvent)
			s.now = ev.at
			ev.fn()
			s.stats.Steps++
		}
	}
	if s.err != nil {
		return s.err
	}
	for id := range uint64(s.total) {
		if s.poison[id] {
			if s.deadLetters[id] == 0 {
				return fmt.Errorf("INVARIANT lost: poison id %d is neither stored nor set aside", id)
			}
			continue
		}
		if s.stored[id] == 0 {
			return fmt.Errorf("id %d was spooled but never stored", id)
		}
		if s.deadLetters[id] != 0 {
			return fmt.Errorf("id %d was stored and also set aside", id)
		}
		s.stats.DuplicateWrites += s.stored[id] - 1
	}
	if len(s.stored) != s.total-len(s.poison) {
		return fmt.Errorf("storage holds %d ids, %d were spooled and %d of them poison", len(s.stored), s.total, len(s.poison))
	}
	s.stats.Poison = len(s.poison)
	for _, n := range s.deadLetters {
		s.stats.SetAside += n
	}
	s.stats.Msgs = s.total
	s.addSenderStats()
	return nil
}

func (s *sim) addSenderStats() {
	st := s.sender.Stats()
	s.stats.Sent += st.Sent
	s.stats.Resent += st.Resent
	s.stats.Timeouts += st.Timeouts
	s.stats.Rejected += st.Rejected
}

func (s *sim) done() bool {
	return len(s.spool) == s.total && s.agentUp && s.persisted == uint64(s.total) &&
		s.sender.Watermark() == uint64(s.total)
}

func (s *sim) describe() string {
	d := fmt.Sprintf("spooled %d/%d, persisted watermark %d, agent up %t, sink up %t",
		len(s.spool), s.total, s.persisted, s.agentUp, s.sinkUp)
	if s.agentUp {
		m, b := s.sender.InFlight()
		d += fmt.Sprintf(", sender %v in flight %d/%d outstanding %d credits %d/%d sent %d/%d RTO %v",
			s.sender.State(), m, b, s.sender.Outstanding(), s.sender.creditMsgs, s.sender.creditBytes,
			s.sender.sentMsgs, s.sender.sentBytes, s.sender.RTO())
	}
	return d
}

// ---- agent ----

func (s *sim) startAgent() {
	cfg := s.scfg
	cfg.Watermark = s.persisted
	snd, err := NewSender(cfg)
	if err != nil {
		s.fail("NewSender: %v", err)
		return
	}
	s.sender, s.agentUp, s.conn = snd, true, nil
	s.wakeArmed, s.setAsideArmed = false, false
	for id := s.persisted; id < uint64(len(s.spool)); id++ {
		s.agentStep(Spooled(id, s.spool[id], s.now))
	}
	s.progress = s.now
	s.dial()
}

func (s *sim) crashAgent() {
	s.stats.AgentCrashes++
	s.addSenderStats()
	s.agentUp = false
	s.inc++
	s.sender = nil
	if c := s.conn; c != nil {
		s.conn = nil
		s.kill(c)
	}
	s.at(s.now+10*ms+s.rng.Int64N(300*ms), s.startAgent)
}

func (s *sim) ingest() {
	if len(s.spool) == s.total {
		return
	}
	if s.agentUp {
		var size int64
		switch r := s.rng.Float64(); {
		case s.pPoison > 0 && r < s.pPoison: // larger than the sink takes: refused for good
			size = s.rcfg.MaxMessageBytes + 1 + s.rng.Int64N(1<<10)
			s.poison[uint64(len(s.spool))] = true
		case r < 0.90:
			size = s.rng.Int64N(2 << 10)
		case r < 0.97:
			size = min(2<<10+s.rng.Int64N(14<<10), s.rcfg.MaxMessageBytes)
		default: // bigger than the sink's queue: only the waivers let it through
			size = s.rcfg.QueueBytes + s.rng.Int64N(s.rcfg.QueueBytes)
		}
		id := uint64(len(s.spool))
		s.spool = append(s.spool, size)
		s.agentStep(Spooled(id, size, s.now))
	}
	gap := s.rng.Int64N(2 * s.ingestGap)
	if s.rng.IntN(10) == 0 {
		gap = 0 // bursts
	}
	s.at(s.now+gap, s.ingest)
}

func (s *sim) agentStep(ev Event) {
	if s.err != nil {
		return
	}
	if err := s.sender.Step(ev); err != nil {
		s.fail("Sender.Step(%v): %v", ev, err)
		return
	}
	if err := s.sender.checkInvariants(); err != nil {
		s.fail("after Sender.Step(%v): %v", ev, err)
		return
	}
	for _, a := range s.sender.Ready() {
		s.agentDo(a)
	}
	s.sender.Advance()
	if w := s.sender.Watermark(); w != s.persisted {
		s.fail("Sender watermark %d, last MarkAcked %d", w, s.persisted)
	}
	if s.sender.Parked() > 0 && !s.setAsideArmed {
		s.setAsideArmed = true
		inc := s.inc
		s.at(s.now+s.rng.Int64N(100*ms), func() {
			if s.inc == inc && s.agentUp {
				s.setAsideArmed = false
				s.setAside()
			}
		})
	}
	s.rearm()
}

// setAside copies every parked message to the dead-letter log (durable)
// and then steps SetAside for it, as the agent's driver does when its
// spool needs the room; a crash may come between the two.
func (s *sim) setAside() {
	for _, id := range s.sender.AppendParked(nil) {
		if !simSetAsideWithoutCopy {
			s.deadLetters[id]++
		}
		if s.faulty() && s.rng.Float64() < 10*s.pAgentCrash {
			s.crashAgent() // after the copy, before SetAside
			return
		}
		s.agentStep(SetAside(id, s.now))
		if !s.agentUp || s.err != nil {
			return
		}
	}
}

// rearm keeps the agent's only timer at the Sender's NextDeadline. A timer
// superseded by a later rearm, or armed before a crash, finds its
// generation changed and does nothing. In adversarial mode the timer also
// fires early now and then: a spurious Tick must change nothing.
func (s *sim) rearm() {
	at, ok := s.sender.NextDeadline()
	if !ok || s.wakeArmed && at == s.wakeAt {
		return
	}
	if at < s.now {
		s.fail("NextDeadline %v is in the past (now %v): Tick left a due deadline", time.Duration(at), time.Duration(s.now))
		return
	}
	s.wakeGen++
	s.wakeArmed, s.wakeAt = true, at
	gen, inc := s.wakeGen, s.inc
	if s.mode == simAdversarial && s.rng.IntN(8) == 0 {
		at = s.now + s.rng.Int64N(at-s.now+1)
	}
	s.at(at, func() {
		if s.inc != inc || !s.agentUp || s.wakeGen != gen {
			return
		}
		s.wakeArmed = false
		s.agentStep(Tick(s.now))
	})
}

// agentDo carries out one Sender action. It never steps the Sender itself:
// everything that feeds back goes through the event queue.
func (s *sim) agentDo(a Action) {
	switch a.Kind {
	case ActionSend:
		if a.ID < s.persisted || a.ID >= uint64(len(s.spool)) {
			s.fail("Send of id %d, spool holds [%d, %d)", a.ID, s.persisted, len(s.spool))
			return
		}
		if a.Size != s.spool[a.ID] {
			s.fail("Send of id %d with size %d, spooled %d", a.ID, a.Size, s.spool[a.ID])
			return
		}
		if c := s.conn; c != nil && c.welcomed {
			id, size := a.ID, a.Size
			s.toSink(c, true, func() { s.sinkStep(c, Received(id, size)) })
		}
	case ActionArmTimer:
		// The Sender keeps its own deadlines, and the driver's one timer
		// follows NextDeadline (see rearm). Adversarial mode also steps
		// some timers as Timeout events, late: live ones must act like
		// Tick, stale ones must be ignored.
		if s.mode == simAdversarial && s.rng.IntN(4) == 0 {
			inc, id, attempt := s.inc, a.ID, a.Attempt
			s.at(a.At+s.rng.Int64N(50*ms), func() {
				if s.inc == inc && s.agentUp {
					s.agentStep(Timeout(id, attempt, s.now))
				}
			})
		}
	case ActionCancelTimer, ActionCancelAllTimers:
	case ActionMarkAcked:
		if a.Watermark <= s.persisted {
			s.fail("MarkAcked %d does not advance the watermark %d", a.Watermark, s.persisted)
			return
		}
		for id := s.persisted; id < a.Watermark; id++ {
			if s.stored[id] == 0 && s.deadLetters[id] == 0 {
				s.fail("INVARIANT lost: watermark moves to %d past id %d, which is neither stored nor set aside", a.Watermark, id)
				return
			}
		}
		s.persisted = a.Watermark
		s.progress = s.now
	case ActionReconnect:
		// The stream is gone already; the dial comes with Dial.
	case ActionDial:
		s.dial()
	case ActionStalled:
		s.fail("Stalled without a ProgressTimeout")
	default:
		s.fail("unknown action %v", a)
	}
}

func (s *sim) dial() {
	inc := s.inc
	if !s.sinkUp || s.faulty() && s.rng.IntN(10) == 0 {
		s.at(s.now+s.delay(), func() {
			if s.inc == inc && s.agentUp {
				s.agentStep(Disconnected(s.rng.Float64(), s.now))
			}
		})
		return
	}
	c := &simConn{alive: true}
	s.conn = c
	s.conns = slices.DeleteFunc(s.conns, func(c *simConn) bool { return !c.alive })
	s.conns = append(s.conns, c)
	s.toSink(c, false, func() {
		r, err := NewReceiver(s.rcfg)
		if err != nil {
			s.fail("NewReceiver: %v", err)
			return
		}
		c.recv = r
		s.sinkStep(c, Hello(ProtocolVersion))
	})
}

// kill resets stream c; each end notices after a delay.
func (s *sim) kill(c *simConn) {
	if !c.alive {
		return
	}
	c.alive = false
	s.stats.Resets++
	if c.recv != nil {
		s.at(s.now+s.delay(), func() { s.sinkStep(c, Close()) })
	}
	if s.agentUp && s.conn == c {
		inc := s.inc
		s.at(s.now+s.delay(), func() {
			if s.inc == inc && s.conn == c {
				s.conn = nil
				s.agentStep(Disconnected(s.rng.Float64(), s.now))
			}
		})
	}
}

// watchdog (adversarial mode): a stream that can lose messages can starve,
// e.g. of a lost Grant; a real driver's keepalive would reset it.
func (s *sim) watchdog() {
	// Only a stream with nothing in flight: a lost Grant starves it, and
	// no timer will fire. A message or an ack lost while something is in
	// flight is the resend timer's to repair, not the watchdog's, so that
	// the simulation depends on Tick's resends (see
	// TestSimulationCatchesMutations).
	if s.agentUp && s.conn != nil && s.conn.alive && s.sender.State() != StateDisconnected &&
		s.sender.inflightMsgs == 0 && s.sender.Outstanding() > 0 && s.now-s.progress > sec {
		s.kill(s.conn)
	}
	s.at(s.now+200*ms, s.watchdog)
}

// ---- network ----

func (s *sim) toSink(c *simConn, mayFault bool, fn func()) {
	s.transmit(c, &c.lastToSink, mayFault, fn)
}

func (s *sim) toAgent(c *simConn, mayFault bool, fn func()) {
	s.transmit(c, &c.lastToAgent, mayFault, fn)
}

func (s *sim) transmit(c *simConn, last *int64, mayFault bool, fn func()) {
	deliver := func() {
		if c.alive {
			fn()
		}
	}
	at := s.now + s.delay()
	if s.mode == simAdversarial && mayFault && s.faulty() {
		if s.rng.Float64() < s.pDrop {
			return
		}
		if s.rng.Float64() < s.pDup {
			s.at(s.now+s.delay(), deliver)
		}
		s.at(at, deliver) // not FIFO: may overtake or be overtaken
		return
	}
	at = max(at, *last)
	*last = at
	s.at(at, deliver)
}

// ---- sink ----

func (s *sim) sinkStep(c *simConn, ev ReceiverEvent) {
	if s.err != nil || c.recv == nil {
		return
	}
	if err := c.recv.Step(ev); err != nil {
		s.fail("Receiver.Step(%v): %v", ev, err)
		return
	}
	if err := c.recv.checkInvariants(); err != nil {
		s.fail("after Receiver.Step(%v): %v", ev, err)
		return
	}
	for _, a := range c.recv.Ready() {
		s.sinkDo(c, a)
	}
	c.recv.Advance()
}

func (s *sim) sinkDo(c *simConn, a ReceiverAction) {
	switch a.Kind {
	case ActionWelcome:
		m, b := a.MsgLimit, a.ByteLimit
		s.toAgent(c, false, func() {
			if !c.welcomed && s.agentUp && s.conn == c {
				c.welcomed = true
				s.progress = s.now
				s.agentStep(Connected(m, b, s.now))
			}
		})
	case ActionEnqueue:
		s.pending = append(s.pending, simWrite{c, a.ID, a.Size})
		if !s.commitScheduled {
			s.commitScheduled = true
			s.at(s.now+s.commitMin+s.rng.Int64N(s.commitMax-s.commitMin), s.commit)
		}
	case ActionAck:
		for _, r := range a.Ranges {
			for id := r.First; id <= r.Last; id++ {
				if s.stored[id] == 0 {
					s.fail("Ack of id %d, which is not stored", id)
					return
				}
			}
		}
		rs := slices.Clone(a.Ranges)
		s.toAgent(c, true, func() { s.agentStep(Acked(rs, s.now)) })
	case ActionGrant:
		m, b := a.MsgLimit, a.ByteLimit
		s.toAgent(c, true, func() { s.agentStep(Credits(m, b, s.now)) })
	case ActionReject:
		id, retry := a.ID, a.Reason.Retryable()
		if !retry && !s.poison[id] {
			s.fail("Reject(%d, %v) for good of a message the sink takes", id, a.Reason)
		}
		s.toAgent(c, true, func() { s.agentStep(Rejected(id, retry, s.now)) })
	case ActionFail:
		s.fail("sink failed a stream of a well-behaved agent: %v", a.Reason)
	default:
		s.fail("unknown action %v", a)
	}
}

// commit durably writes up to commitBatch pending writes, then reports
// them per stream.
func (s *sim) commit() {
	s.commitScheduled = false
	if !s.sinkUp || len(s.pending) == 0 {
		return
	}
	if s.now < s.stallUntil {
		s.commitScheduled = true
		s.at(s.stallUntil, s.commit)
		return
	}
	n := min(len(s.pending), s.commitBatch)
	batch := slices.Clone(s.pending[:n])
	s.pending = slices.Delete(s.pending, 0, n)
	if len(s.pending) > 0 {
		s.commitScheduled = true
		s.at(s.now+s.commitMin+s.rng.Int64N(s.commitMax-s.commitMin), s.commit)
	}
	for _, w := range batch {
		if w.id >= uint64(len(s.spool)) {
			s.fail("storage got id %d, never spooled", w.id)
			return
		}
		if s.poison[w.id] {
			s.fail("INVARIANT corrupted: poison id %d (larger than the sink takes) was stored", w.id)
		}
		s.stored[w.id]++
	}
	for len(batch) > 0 {
		c := batch[0].c
		var ids []uint64
		rest := batch[:0]
		for _, w := range batch {
			if w.c == c {
				ids = append(ids, w.id)
			} else {
				rest = append(rest, w)
			}
		}
		batch = rest
		s.sinkStep(c, Stored(ids))
	}
}

func (s *sim) crashSink() {
	s.stats.SinkCrashes++
	s.sinkUp = false
	s.pending = nil
	for _, c := range s.conns {
		c.recv = nil // died with the process: no Close
		s.kill(c)
	}
	s.conns = s.conns[:0]
	s.at(s.now+10*ms+s.rng.Int64N(500*ms), func() { s.sinkUp = true })
}

// ---- faults ----

func (s *sim) faultTick() {
	if !s.faulty() {
		return
	}
	switch r := s.rng.Float64(); {
	case r < s.pReset:
		if s.conn != nil {
			s.kill(s.conn)
		}
	case r < s.pReset+s.pAgentCrash:
		if s.agentUp {
			s.crashAgent()
		}
	case r < s.pReset+s.pAgentCrash+s.pSinkCrash:
		if s.sinkUp {
			s.crashSink()
		}
	case r < s.pReset+s.pAgentCrash+s.pSinkCrash+s.pStall:
		s.stats.Stalls++
		s.stallUntil = s.now + 100*ms + s.rng.Int64N(1500*ms)
	}
	s.at(s.now+faultEvery, s.faultTick)
}

// simSetAsideWithoutCopy switches off the driver's copy of a parked
// message to the dead-letter log before it steps SetAside (a mutation of
// the simulated driver, for TestSimulationCatchesMutations).
var simSetAsideWithoutCopy bool

// TestSimulationCatchesMutations proves the simulation can fail: with a
// guarantee switched off, some seed must break safety or liveness.
func TestSimulationCatchesMutations(t *testing.T) {
	for _, mu := range []struct {
		name string
		flag *bool
	}{
		{"Tick drops expired resend timers without requeueing", &mutation.tickSkipsRequeue},
		{"the driver sets a parked message aside without copying it", &simSetAsideWithoutCopy},
	} {
		t.Run(mu.name, func(t *testing.T) {
			*mu.flag = true
			defer func() { *mu.flag = false }()
			for _, mode := range []simMode{simNormal, simAdversarial} {
				var seeds []uint64
				for seed := range uint64(200) {
					seeds = append(seeds, seed)
				}
				for _, r := range runSims(seeds, mode) {
					if r.err != nil {
						t.Logf("caught in %v mode by seed %d: %v", mode, r.seed, r.err)
						return
					}
				}
			}
			t.Fatal("no seed caught the mutation")
		})
	}
}
