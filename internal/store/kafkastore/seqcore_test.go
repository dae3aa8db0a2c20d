package kafkastore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The tests of seqCore, the idempotent batch writer's bookkeeping
// (seqcore.go): TestSeqCoreTable steps it through every state × event
// cell that matters, TestSeqCoreSimulation drives it with seeded faults
// against a model of the broker, and TestSeqCoreAddAnswerAllocFree holds
// its hot path to no allocation. The Kafka tests (seqwriter_test.go,
// agentbatch_test.go) drive it through seqRound against a real broker.

// Helpers. A partition's batches carry one record each unless a case
// says otherwise; "p0#3g1" is batch 3 of the round, of partition 0, sent
// (or answered) in generation 1.

// add puts n one-record batches of partition part in the round.
func add(c *seqCore, part int32, n int) {
	for range n {
		c.Add(part, 1)
	}
}

// sweep sends what NextSend names, every send succeeding, and lists it
// ("-": nothing).
func sweep(c *seqCore) string {
	return sweepFailing(c)
}

// sweepFailing is sweep with the first send to each of the partitions
// fail failing; "p0#3g1!" is a failed send.
func sweepFailing(c *seqCore, fail ...int32) string {
	var out []string
	for {
		s, ok := c.NextSend()
		if !ok {
			break
		}
		if i := slices.Index(fail, s.Part); i >= 0 {
			fail = slices.Delete(fail, i, i+1)
			if a := c.SendFailed(s.Part); a != seqForget {
				out = append(out, "SendFailed returned "+a.String())
			}
			out = append(out, fmt.Sprintf("p%d#%dg%d!", s.Part, s.Idx, s.Gen))
			continue
		}
		c.Sent(s.Part)
		out = append(out, fmt.Sprintf("p%d#%dg%d", s.Part, s.Idx, s.Gen))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

// state describes partition part's state and the round's.
func state(c *seqCore, part int32) string {
	var b strings.Builder
	if p := c.parts[part]; p != nil && p.round == c.round {
		fmt.Fprintf(&b, "p%d %v acked=%d sent=%d gen=%d", part, p.idx, p.acked, p.sent, p.gen)
	} else {
		fmt.Fprintf(&b, "p%d idle", part)
	}
	fmt.Fprintf(&b, " next=%d left=%d", c.next[part], c.left)
	if attempt, wait := c.Backoff(); wait {
		fmt.Fprintf(&b, " backoff#%d", attempt)
	}
	if c.Failed() {
		b.WriteString(" failed")
	}
	if c.Done() {
		b.WriteString(" done")
	}
	return b.String()
}

// answer gives c an answer and lists what it asked.
func answer(c *seqCore, part int32, idx, gen int, kind seqAnswerKind) string {
	return c.Answer(part, idx, gen, kind).String()
}

// Setups: each returns a round in a known state, its sends swept.

// roomy: partition 0 has batches 0 to 2 in flight, room for two more.
func roomy() *seqCore {
	c := newSeqCore()
	c.Begin()
	add(c, 0, 3)
	sweep(c)
	return c
}

// full: partition 0 has batches 0 to 4 in flight and 5, 6 waiting.
func full() *seqCore {
	c := newSeqCore()
	c.Begin()
	add(c, 0, 7)
	sweep(c)
	return c
}

// resent: roomy, then batch 0's connection failed: generation 1, nothing
// sent in it yet (batches 1 and 2's answers, in generation 0, are still
// to come).
func resent() *seqCore {
	c := roomy()
	c.Answer(0, 0, 0, seqRetriable)
	return c
}

// backingOff: partitions 0 and 1 with a batch each; partition 0's send
// failed in the sweep, partition 1's went.
func backingOff() *seqCore {
	c := newSeqCore()
	c.Begin()
	add(c, 0, 1)
	add(c, 1, 1)
	sweepFailing(c, 0)
	return c
}

func TestSeqCoreTable(t *testing.T) {
	type cell struct {
		name  string
		given func() *seqCore
		when  func(c *seqCore) string // the event(s), and what the core asked
		want  string
		then  string // state(c, 0) afterwards
	}
	cells := []cell{
		// Add, in each state of the partition.
		{"idle: Add sends at once, sequence 0", func() *seqCore { c := newSeqCore(); c.Begin(); return c },
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"p0#0g0", "p0 [0] acked=0 sent=1 gen=0 next=1 left=1"},
		{"idle beside a busy partition: indexes run across partitions", func() *seqCore { c := newSeqCore(); c.Begin(); add(c, 1, 2); sweep(c); return c },
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"p0#2g0", "p0 [2] acked=0 sent=1 gen=0 next=1 left=3"},
		{"with room: Add sends", roomy,
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"p0#3g0", "p0 [0 1 2 3] acked=0 sent=4 gen=0 next=4 left=4"},
		{"with room: the fifth in flight goes, the sixth waits", roomy,
			func(c *seqCore) string { add(c, 0, 3); return sweep(c) },
			"p0#3g0 p0#4g0", "p0 [0 1 2 3 4 5] acked=0 sent=5 gen=0 next=6 left=6"},
		{"full at 5 in flight: Add sends nothing", full,
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"-", "p0 [0 1 2 3 4 5 6 7] acked=0 sent=5 gen=0 next=8 left=8"},
		{"after a re-send: Add sends again from the first unanswered", resent,
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"p0#0g1 p0#1g1 p0#2g1 p0#3g1", "p0 [0 1 2 3] acked=0 sent=4 gen=1 next=4 left=4"},
		{"backing off: Add sends nothing", backingOff,
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"-", "p0 [0 2] acked=0 sent=0 gen=1 next=2 left=3 backoff#1"},
		{"done: Add opens the round again", func() *seqCore {
			c := roomy()
			c.Answer(0, 0, 0, seqStored)
			c.Answer(0, 1, 0, seqStored)
			c.Answer(0, 2, 0, seqStored)
			return c
		},
			func(c *seqCore) string { add(c, 0, 1); return sweep(c) },
			"p0#3g0", "p0 [0 1 2 3] acked=3 sent=4 gen=0 next=4 left=1"},

		// Answers in order.
		{"stored, oldest unanswered: counts", roomy,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqStored) },
			"record", "p0 [0 1 2] acked=1 sent=3 gen=0 next=3 left=2"},
		{"duplicate, oldest unanswered: counts, offset unknown", roomy,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqDuplicate) },
			"record-duplicate", "p0 [0 1 2] acked=1 sent=3 gen=0 next=3 left=2"},
		{"all stored: done", roomy,
			func(c *seqCore) string {
				return answer(c, 0, 0, 0, seqStored) + " " + answer(c, 0, 1, 0, seqDuplicate) + " " + answer(c, 0, 2, 0, seqStored)
			},
			"record record-duplicate record", "p0 [0 1 2] acked=3 sent=3 gen=0 next=3 left=0 done"},
		{"full: an answer makes room for one more", full,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqStored) + "; " + sweep(c) },
			"record; p0#5g0", "p0 [0 1 2 3 4 5 6] acked=1 sent=6 gen=0 next=7 left=6"},
		{"after a re-send: the re-send's answer counts", resent,
			func(c *seqCore) string { sweep(c); return answer(c, 0, 0, 1, seqDuplicate) },
			"record-duplicate", "p0 [0 1 2] acked=1 sent=3 gen=1 next=3 left=2"},

		// Answers out of order, twice, or to nothing: unsettled.
		{"stored, not the oldest unanswered: fails unsettled", roomy,
			func(c *seqCore) string { return answer(c, 0, 1, 0, seqStored) },
			"fail-unsettled", "p0 [0 1 2] acked=0 sent=3 gen=0 next=3 left=3 failed"},
		{"duplicate, not the oldest unanswered: fails unsettled", roomy,
			func(c *seqCore) string { return answer(c, 0, 2, 0, seqDuplicate) },
			"fail-unsettled", "p0 [0 1 2] acked=0 sent=3 gen=0 next=3 left=3 failed"},
		{"the same answer twice: the second fails unsettled", roomy,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqStored) + " " + answer(c, 0, 0, 0, seqStored) },
			"record fail-unsettled", "p0 [0 1 2] acked=1 sent=3 gen=0 next=3 left=2 failed"},
		{"stored, nothing in flight: fails unsettled", func() *seqCore { c := full(); c.Answer(0, 0, 0, seqRetriable); return c },
			func(c *seqCore) string { return answer(c, 0, 0, 1, seqStored) },
			"fail-unsettled", "p0 [0 1 2 3 4 5 6] acked=0 sent=0 gen=1 next=7 left=7 failed"},

		// Stale answers (an older generation) are ignored, whatever they say.
		{"stale stored", resent,
			func(c *seqCore) string { return answer(c, 0, 1, 0, seqStored) },
			"nothing", "p0 [0 1 2] acked=0 sent=0 gen=1 next=3 left=3"},
		{"stale fatal", resent,
			func(c *seqCore) string { return answer(c, 0, 2, 0, seqFatal) },
			"nothing", "p0 [0 1 2] acked=0 sent=0 gen=1 next=3 left=3"},
		{"stale retriable: no second re-send", resent,
			func(c *seqCore) string { return answer(c, 0, 1, 0, seqRetriable) },
			"nothing", "p0 [0 1 2] acked=0 sent=0 gen=1 next=3 left=3"},
		{"stale after a failed send", backingOff,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqStored) },
			"nothing", "p0 [0] acked=0 sent=0 gen=1 next=1 left=2 backoff#1"},
		{"from the round before", func() *seqCore { c := roomy(); c.Begin(); add(c, 0, 1); sweep(c); return c },
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqStored) },
			"nothing", "p0 [0] acked=0 sent=1 gen=1 next=4 left=1"},
		{"of a partition not in the round", roomy,
			func(c *seqCore) string { return answer(c, 7, 0, 0, seqStored) },
			"nothing", "p0 [0 1 2] acked=0 sent=3 gen=0 next=3 left=3"},

		// Retriable answers: re-send from the first unanswered.
		{"retriable, oldest: everything unanswered goes again", roomy,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqRetriable) + "; " + sweep(c) },
			"forget; p0#0g1 p0#1g1 p0#2g1", "p0 [0 1 2] acked=0 sent=3 gen=1 next=3 left=3"},
		{"retriable after one stored: from the first unanswered", roomy,
			func(c *seqCore) string {
				return answer(c, 0, 0, 0, seqStored) + " " + answer(c, 0, 1, 0, seqRetriable) + "; " + sweep(c)
			},
			"record forget; p0#1g1 p0#2g1", "p0 [0 1 2] acked=1 sent=3 gen=1 next=3 left=2"},
		{"retriable when full: five go again, in order", full,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqRetriable) + "; " + sweep(c) },
			"forget; p0#0g1 p0#1g1 p0#2g1 p0#3g1 p0#4g1", "p0 [0 1 2 3 4 5 6] acked=0 sent=5 gen=1 next=7 left=7"},
		{"retriable twice: a generation each", resent,
			func(c *seqCore) string { sweep(c); return answer(c, 0, 0, 1, seqRetriable) + "; " + sweep(c) },
			"forget; p0#0g2 p0#1g2 p0#2g2", "p0 [0 1 2] acked=0 sent=3 gen=2 next=3 left=3"},

		// Fatal answers end the round; nothing after counts or sends.
		{"fatal", roomy,
			func(c *seqCore) string { return answer(c, 0, 0, 0, seqFatal) },
			"fail-refused", "p0 [0 1 2] acked=0 sent=3 gen=0 next=3 left=3 failed"},
		{"failed: answers are ignored, nothing is sent", func() *seqCore { c := full(); c.Answer(0, 0, 0, seqFatal); return c },
			func(c *seqCore) string {
				return answer(c, 0, 0, 0, seqStored) + " " + answer(c, 0, 1, 0, seqRetriable) + "; " + sweep(c)
			},
			"nothing nothing; -", "p0 [0 1 2 3 4 5 6] acked=0 sent=5 gen=0 next=7 left=7 failed"},

		// Failed sends and the back-off.
		{"a failed send: the others of the sweep go, then the back-off", func() *seqCore {
			c := newSeqCore()
			c.Begin()
			add(c, 0, 2)
			add(c, 1, 1)
			return c
		},
			func(c *seqCore) string { return sweepFailing(c, 0) },
			"p0#0g0! p1#2g0", "p0 [0 1] acked=0 sent=0 gen=1 next=2 left=3 backoff#1"},
		{"a failed send mid-window: the sent ones' answers go stale", roomy,
			func(c *seqCore) string {
				add(c, 0, 1)
				s := sweepFailing(c, 0)
				return s + "; " + answer(c, 0, 0, 0, seqStored)
			},
			"p0#3g0!; nothing", "p0 [0 1 2 3] acked=0 sent=0 gen=1 next=4 left=4 backoff#1"},
		{"backed off: the partition sends again", backingOff,
			func(c *seqCore) string { c.BackedOff(); return sweep(c) },
			"p0#0g1", "p0 [0] acked=0 sent=1 gen=1 next=1 left=2"},
		{"a second back-off in a row waits longer", backingOff,
			func(c *seqCore) string { c.BackedOff(); return sweepFailing(c, 0) },
			"p0#0g1!", "p0 [0] acked=0 sent=0 gen=2 next=1 left=2 backoff#2"},
		{"a stored batch starts the back-offs' count again", backingOff,
			func(c *seqCore) string {
				c.BackedOff()
				return answer(c, 1, 1, 0, seqStored) + "; " + sweepFailing(c, 0)
			},
			"record; p0#0g1!", "p0 [0] acked=0 sent=0 gen=2 next=1 left=1 backoff#1"},

		// Sequences: go on from round to round, restart with a producer id, wrap.
		{"a new round goes on from the last sequence", roomy,
			func(c *seqCore) string { c.Begin(); _, s := c.Add(0, 1); return fmt.Sprint(s) },
			"3", "p0 [0] acked=0 sent=0 gen=1 next=4 left=1"},
		{"a new producer id restarts at 0", roomy,
			func(c *seqCore) string { c.NewProducerID(); c.Begin(); _, s := c.Add(0, 1); return fmt.Sprint(s) },
			"0", "p0 [0] acked=0 sent=0 gen=1 next=1 left=1"},
		{"records move the sequence on", func() *seqCore { c := newSeqCore(); c.Begin(); return c },
			func(c *seqCore) string { _, a := c.Add(0, 10); _, b := c.Add(0, 5); return fmt.Sprint(a, b) },
			"0 10", "p0 [0 1] acked=0 sent=0 gen=0 next=15 left=2"},
		{"wrap: a batch across the largest int32", func() *seqCore { c := newSeqCore(); c.next[0] = math.MaxInt32 - 1; c.Begin(); return c },
			func(c *seqCore) string { _, a := c.Add(0, 3); _, b := c.Add(0, 1); return fmt.Sprint(a, b) },
			"2147483646 1", "p0 [0 1] acked=0 sent=0 gen=0 next=2 left=2"},
		{"wrap: a batch ending at the largest int32", func() *seqCore { c := newSeqCore(); c.next[0] = math.MaxInt32; c.Begin(); return c },
			func(c *seqCore) string { _, a := c.Add(0, 1); _, b := c.Add(0, 1); return fmt.Sprint(a, b) },
			"2147483647 0", "p0 [0 1] acked=0 sent=0 gen=0 next=1 left=2"},
	}
	for _, tc := range cells {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.given()
			if got := tc.when(c); got != tc.want {
				t.Errorf("core asked %q, want %q", got, tc.want)
			}
			if got := state(c, 0); got != tc.then {
				t.Errorf("then\n %s\nwant\n %s", got, tc.then)
			}
		})
	}
}

// TestSeqCoreSentNotNamedPanics: a Sent or SendFailed for a batch NextSend
// did not name is the driver's bug, and the core says so rather than
// count a send that did not happen.
func TestSeqCoreSentNotNamedPanics(t *testing.T) {
	for _, ev := range []func(c *seqCore){
		func(c *seqCore) { c.Sent(1) },
		func(c *seqCore) { c.SendFailed(1) },
	} {
		c := newSeqCore()
		c.Begin()
		add(c, 0, 1)
		c.NextSend()
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			ev(c)
		}()
	}
}

// TestSeqCoreAddAnswerAllocFree: a round in steady state (its partitions
// seen in an earlier round) allocates nothing per batch: Add runs on the
// compressor's goroutine once a batch.
func TestSeqCoreAddAnswerAllocFree(t *testing.T) {
	c := newSeqCore()
	round := func() {
		c.Begin()
		for i := range 64 {
			part := int32(i % 4)
			idx, _ := c.Add(part, 10)
			for {
				s, ok := c.NextSend()
				if !ok {
					break
				}
				c.Sent(s.Part)
			}
			if c.Answer(part, idx, c.parts[part].gen, seqStored) != seqRecord {
				t.Fatal("not recorded")
			}
		}
		if !c.Done() {
			t.Fatal("not done")
		}
	}
	round() // the partitions' first round allocates them
	if n := testing.AllocsPerRun(20, round); n != 0 {
		t.Errorf("%v allocations a round of 64 batches, want 0", n)
	}
}

func BenchmarkSeqCoreAddAnswer(b *testing.B) {
	c := newSeqCore()
	c.Begin()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			c.Begin()
		}
		part := int32(i % 4)
		idx, _ := c.Add(part, 10)
		for {
			s, ok := c.NextSend()
			if !ok {
				break
			}
			c.Sent(s.Part)
		}
		c.Answer(part, idx, c.parts[part].gen, seqStored)
	}
}

// TestSeqCoreSimulation drives seqCore as seqRound does (Add, sweeps of
// NextSend, answers, back-offs) over rounds of random batches, against a
// model of the broker and of what the core must decide, with seeded
// faults:
//   - a send fails (no leader, no connection);
//   - a request is lost before the broker, or the broker answers
//     NOT_LEADER (retriable, not stored), or its answer is lost after the
//     broker stored it (retriable, stored);
//   - requests of an older generation reach the broker after a re-send
//     began, so their answers come stale, and the re-send's copies are
//     answered as duplicates.
//
// Odd seeds add chaos: answers delivered out of order, delivered twice,
// and batches refused (fatal). The broker model stores a batch only with
// the partition's next sequence, answers one of its last five again as a
// duplicate and anything else as out of order (fatal), as Kafka does for
// an idempotent producer.
//
// It checks, at every step: the sequence each batch gets; at most five
// batches of a partition in flight, sent in order from the first
// unanswered; a stale answer never counts or re-sends; only the oldest
// unanswered batch is counted, once; a round fails only on an answer it
// cannot settle. At the end of each round that is done: every batch was
// counted exactly once, and the broker holds each exactly once, in order.
// Even seeds have no chaos, and every round of theirs must be done.
//
// Every violation is reported as "INVARIANT <category>:" (scripts/mutate.sh
// kills mutation_seqignoregen on stale-answer and mutation_seqanyorder on
// acked-out-of-order).
func TestSeqCoreSimulation(t *testing.T) {
	seeds := 2000
	if testing.Short() {
		seeds = 200
	}
	var total seqSimStats
	for seed := range seeds {
		sim := newSeqSim(uint64(seed), seed%2 == 1)
		if err := sim.run(6); err != nil {
			t.Fatalf("INVARIANT %s (seed %d, chaos %v)", err, seed, sim.chaos)
		}
		total.add(sim.stats)
	}
	t.Logf("%+v", total)
	// The faults must have met the cases they exist for.
	for name, n := range map[string]int{
		"rounds done": total.done, "chaos rounds done": total.chaosDone, "rounds failed": total.failed,
		"stale answers": total.stale, "duplicates counted": total.duplicates, "re-sends": total.resends,
		"failed sends": total.sendFails, "back-offs": total.backoffs, "full windows": total.fullWindows,
		"sequences wrapped": total.wraps,
	} {
		if n == 0 {
			t.Errorf("no %s in %d seeds: the simulation does not reach that case", name, seeds)
		}
	}
}

type seqSimStats struct {
	done, chaosDone, failed                  int
	stale, duplicates, resends, sendFails    int
	backoffs, fullWindows, wraps, deliveries int
}

func (s *seqSimStats) add(o seqSimStats) {
	s.done += o.done
	s.chaosDone += o.chaosDone
	s.failed += o.failed
	s.stale += o.stale
	s.duplicates += o.duplicates
	s.resends += o.resends
	s.sendFails += o.sendFails
	s.backoffs += o.backoffs
	s.fullWindows += o.fullWindows
	s.wraps += o.wraps
	s.deliveries += o.deliveries
}

// simReq is a produce request on its way to the broker; simAns its answer
// on its way back.
type simReq struct {
	part     int32
	idx, gen int
	seq, n   int32
}

type simAns struct {
	simReq
	kind seqAnswerKind
}

// simBroker is one partition's leader, for one producer id: its log (the
// round's batch indexes it stored) and the sequence state Kafka keeps.
type simBroker struct {
	next   int32
	recent []int32 // the last five stored batches' first sequences
	log    []int
}

type seqSim struct {
	rng   *rand.Rand
	chaos bool
	c     *seqCore
	parts int
	stats seqSimStats

	// The round's batches and what the model says of each partition.
	batch   []simReq   // by index: partition, sequence, records
	byPart  [][]int    // each partition's batch indexes, in order
	pos     []int      // each batch's place in its partition
	counted []int      // per batch: the times the core recorded it
	gen     []int      // per partition: the generation whose answers count
	acked   []int      // per partition: batches recorded
	sent    []int      // per partition: batches sent in gen
	next    []int32    // per partition: the sequence the next batch must get
	wire    [][]simReq // per partition, requests not yet at the broker, in send order
	transit [][]simAns // per partition, answers not yet delivered, in order
	broker  []simBroker
}

func newSeqSim(seed uint64, chaos bool) *seqSim {
	rng := rand.New(rand.NewPCG(seed, 0x5e9c0de))
	s := &seqSim{rng: rng, chaos: chaos, c: newSeqCore(), parts: 1 + rng.IntN(3)}
	s.gen = make([]int, s.parts)
	s.acked = make([]int, s.parts)
	s.sent = make([]int, s.parts)
	s.next = make([]int32, s.parts)
	s.newProducer()
	return s
}

// newProducer is what the driver does after a failed round: a new
// producer id, new connections (what was on the old ones is gone), a
// broker that knows nothing of the new id. Some partitions start near
// the largest sequence, so that their sequences wrap.
func (s *seqSim) newProducer() {
	s.c.NewProducerID()
	s.broker = make([]simBroker, s.parts)
	s.wire = make([][]simReq, s.parts)
	s.transit = make([][]simAns, s.parts)
	for p := range s.parts {
		s.next[p] = 0
		if s.rng.IntN(2) == 0 {
			s.next[p] = math.MaxInt32 - int32(s.rng.IntN(40))
			s.c.next[int32(p)] = s.next[p]
		}
		s.broker[p].next = s.next[p]
	}
}

// run plays rounds and returns the first invariant broken, as
// "<category>: <what>".
func (s *seqSim) run(rounds int) error {
	for r := range rounds {
		if err := s.round(); err != nil {
			return fmt.Errorf("%w (round %d)", err, r)
		}
	}
	return nil
}

func (s *seqSim) round() error {
	c := s.c
	c.Begin()
	s.batch, s.pos, s.counted = s.batch[:0], s.pos[:0], s.counted[:0]
	s.byPart = make([][]int, s.parts)
	for p := range s.parts {
		// A partition's generation moves when it joins a round again
		// (Add); the model learns it from NextSend's first batch.
		s.gen[p], s.acked[p], s.sent[p] = -1, 0, 0
		s.broker[p].log = s.broker[p].log[:0]
		s.wire[p], s.transit[p] = s.wire[p][:0], s.transit[p][:0]
	}
	toAdd := 1 + s.rng.IntN(40)
	for step := 0; ; step++ {
		if step > 100000 {
			return fmt.Errorf("stuck: %d of %d batches added, round not done after %d steps: %s", len(s.batch), toAdd, step, state(c, 0))
		}
		if c.Failed() {
			if !s.chaos {
				return fmt.Errorf("failed-without-chaos: the round failed with no answer out of order, twice or refused")
			}
			s.stats.failed++
			s.newProducer()
			return nil
		}
		if len(s.batch) == toAdd && c.Done() {
			return s.checkDone()
		}
		switch k := s.rng.IntN(16); {
		case k < 3 && len(s.batch) < toAdd:
			if err := s.add(); err != nil {
				return err
			}
			if err := s.sweep(); err != nil {
				return err
			}
		case k < 6:
			if err := s.sweep(); err != nil {
				return err
			}
		case k < 10:
			s.brokerStep()
		case k < 15:
			if err := s.deliver(); err != nil {
				return err
			}
		default:
			if _, wait := c.Backoff(); wait {
				s.stats.backoffs++
				c.BackedOff()
			}
		}
	}
}

// add puts a batch of 1 to 3 records in the round, in a random partition.
func (s *seqSim) add() error {
	p := int32(s.rng.IntN(s.parts))
	n := int32(1 + s.rng.IntN(3))
	idx, seq := s.c.Add(p, n)
	if idx != len(s.batch) {
		return fmt.Errorf("index: batch %d added as %d", len(s.batch), idx)
	}
	if seq != s.next[p] {
		return fmt.Errorf("sequence: partition %d's batch %d got %d, want %d", p, idx, seq, s.next[p])
	}
	after := int64(seq) + int64(n)
	if after > math.MaxInt32 {
		after -= 1 << 31
		s.stats.wraps++
	}
	s.next[p] = int32(after)
	s.batch = append(s.batch, simReq{part: p, idx: idx, seq: seq, n: n})
	s.pos = append(s.pos, len(s.byPart[p]))
	s.byPart[p] = append(s.byPart[p], idx)
	s.counted = append(s.counted, 0)
	return nil
}

// sweep sends what the core names, as seqRound.sendReady does; a few
// sends fail.
func (s *seqSim) sweep() error {
	for {
		snd, ok := s.c.NextSend()
		if !ok {
			return nil
		}
		p := snd.Part
		if s.gen[p] < 0 {
			s.gen[p] = snd.Gen
		}
		if snd.Gen != s.gen[p] {
			return fmt.Errorf("generation: batch %d of partition %d sent in generation %d, want %d", snd.Idx, p, snd.Gen, s.gen[p])
		}
		if snd.Idx < 0 || snd.Idx >= len(s.batch) || s.batch[snd.Idx].part != p || s.pos[snd.Idx] != s.sent[p] {
			return fmt.Errorf("send-out-of-order: sent batch %d of partition %d, want its batch at place %d", snd.Idx, p, s.sent[p])
		}
		if s.sent[p]-s.acked[p] >= seqMaxInflight {
			return fmt.Errorf("window-exceeded: batch %d of partition %d sent with %d in flight", snd.Idx, p, s.sent[p]-s.acked[p])
		}
		if s.rng.IntN(40) == 0 {
			s.stats.sendFails++
			if a := s.c.SendFailed(p); a != seqForget {
				return fmt.Errorf("forget: a failed send asked %v", a)
			}
			s.gen[p]++
			s.sent[p] = s.acked[p]
			continue
		}
		s.c.Sent(p)
		s.sent[p]++
		if s.sent[p]-s.acked[p] == seqMaxInflight {
			s.stats.fullWindows++
		}
		r := s.batch[snd.Idx]
		r.gen = snd.Gen
		s.wire[p] = append(s.wire[p], r)
	}
}

// brokerStep has one partition's leader take its next request and answer it.
func (s *seqSim) brokerStep() {
	p := s.pickPartition(func(p int) bool { return len(s.wire[p]) > 0 })
	if p < 0 {
		return
	}
	r := s.wire[p][0]
	s.wire[p] = s.wire[p][1:]
	b := &s.broker[p]
	a := simAns{simReq: r}
	switch {
	case s.rng.IntN(30) == 0: // lost on the way, or NOT_LEADER
		a.kind = seqRetriable
	case s.chaos && s.rng.IntN(150) == 0: // refused for what it is
		a.kind = seqFatal
	case slices.Contains(b.recent, r.seq):
		a.kind = seqDuplicate
	case r.seq == b.next:
		b.log = append(b.log, r.idx)
		b.recent = append(b.recent, r.seq)
		if len(b.recent) > 5 {
			b.recent = b.recent[1:]
		}
		b.next = nextSequence(r.seq, r.n)
		a.kind = seqStored
		if s.rng.IntN(30) == 0 { // stored, and the answer lost with its connection
			a.kind = seqRetriable
		}
	default: // OutOfOrderSequenceNumber
		a.kind = seqFatal
	}
	s.transit[p] = append(s.transit[p], a)
}

// deliver gives the core one partition's next answer, or with chaos any
// of its answers, and sometimes the same one again later.
func (s *seqSim) deliver() error {
	p := s.pickPartition(func(p int) bool { return len(s.transit[p]) > 0 })
	if p < 0 {
		return nil
	}
	i := 0
	if s.chaos && s.rng.IntN(30) == 0 {
		i = s.rng.IntN(len(s.transit[p]))
	}
	a := s.transit[p][i]
	if !s.chaos || s.rng.IntN(40) != 0 {
		s.transit[p] = slices.Delete(s.transit[p], i, i+1)
	}
	s.stats.deliveries++
	act := s.c.Answer(a.part, a.idx, a.gen, a.kind)
	if a.gen != s.gen[p] {
		s.stats.stale++
		if act != seqNothing {
			return fmt.Errorf("stale-answer: %v answer for batch %d of partition %d in generation %d (now %d): %v, want nothing", a.kind, a.idx, p, a.gen, s.gen[p], act)
		}
		return nil
	}
	oldest := s.acked[p] < s.sent[p] && s.pos[a.idx] == s.acked[p]
	switch act {
	case seqRecord, seqRecordDuplicate:
		if !oldest {
			return fmt.Errorf("acked-out-of-order: batch %d (place %d) of partition %d counted with %d counted, %d sent", a.idx, s.pos[a.idx], p, s.acked[p], s.sent[p])
		}
		if want := map[seqAnswerKind]seqAction{seqStored: seqRecord, seqDuplicate: seqRecordDuplicate}[a.kind]; act != want {
			return fmt.Errorf("record: %v answer taken as %v", a.kind, act)
		}
		if act == seqRecordDuplicate {
			s.stats.duplicates++
		}
		s.counted[a.idx]++
		s.acked[p]++
	case seqForget:
		if a.kind != seqRetriable {
			return fmt.Errorf("forget: on a %v answer", a.kind)
		}
		s.stats.resends++
		s.gen[p]++
		s.sent[p] = s.acked[p]
	case seqFailUnsettled:
		if oldest || a.kind != seqStored && a.kind != seqDuplicate {
			return fmt.Errorf("failed-settled: %v answer for the oldest unanswered batch %d of partition %d failed the round", a.kind, a.idx, p)
		}
	case seqFailRefused:
		if a.kind != seqFatal {
			return fmt.Errorf("failed-settled: %v answer refused the round", a.kind)
		}
	default:
		return fmt.Errorf("dropped-answer: %v answer for batch %d of partition %d in the current generation: %v", a.kind, a.idx, p, act)
	}
	return nil
}

// checkDone checks a round the core says is done: every batch counted
// once, and in the broker once, in its partition's order.
func (s *seqSim) checkDone() error {
	for i, n := range s.counted {
		if n != 1 {
			return fmt.Errorf("acked-out-of-order: batch %d counted %d times at the round's end", i, n)
		}
	}
	for p := range s.parts {
		if !slices.Equal(s.broker[p].log, s.byPart[p]) {
			return fmt.Errorf("broker-log: partition %d stored %v, want %v", p, s.broker[p].log, s.byPart[p])
		}
	}
	s.stats.done++
	if s.chaos {
		s.stats.chaosDone++
	}
	return nil
}

// pickPartition returns a random partition for which ok holds, or -1.
func (s *seqSim) pickPartition(ok func(int) bool) int {
	start := s.rng.IntN(s.parts)
	for i := range s.parts {
		if p := (start + i) % s.parts; ok(p) {
			return p
		}
	}
	return -1
}

func (k seqAnswerKind) String() string {
	return [...]string{"stored", "duplicate", "retriable", "fatal"}[k]
}
