package kafkastore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// agentMsg is message id of agent holding recs as the session hands it to
// the store: with kind codec.KafkaZstd, the records section an agent
// seals (kafkarec.AppendRecords) compressed as the agent compresses it;
// with codec.Zstd or codec.Plain, an internal/batch batch.
func agentMsg(t testing.TB, agent string, id uint64, kind codec.Kind, recs [][]byte) *store.Message {
	t.Helper()
	var bb batch.Builder
	for _, r := range recs {
		if err := bb.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	body := bb.Bytes()
	if kind == codec.KafkaZstd {
		section, _, err := kafkarec.AppendRecords(nil, body, []byte(agent), id)
		if err != nil {
			t.Fatal(err)
		}
		body = section
	}
	out, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, body, kind, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Message{Agent: agent, AgentB: []byte(agent), ID: id, Codec: kind, Records: uint32(len(recs)), Body: out}
}

// readTopic reads topic from its start until it has n records, and
// returns them with the compressed size of every batch read.
func readTopic(t testing.TB, addr, topic string, n int) (recs []*kgo.Record, batchBytes []int) {
	t.Helper()
	var mu sync.Mutex
	hook := batchSizes(func(m kgo.FetchBatchMetrics) {
		mu.Lock()
		batchBytes = append(batchBytes, m.CompressedBytes)
		mu.Unlock()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.WithHooks(hook),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s within a minute", len(recs), n, topic)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("fetch: %v", err) })
		recs = append(recs, fs.Records()...)
	}
	if len(recs) != n {
		t.Fatalf("%d records in %s, want %d", len(recs), topic, n)
	}
	mu.Lock()
	defer mu.Unlock()
	return recs, slices.Clone(batchBytes)
}

type batchSizes func(kgo.FetchBatchMetrics)

func (h batchSizes) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h(m)
}

// byPartition groups records by partition, each in offset order.
func byPartition(recs []*kgo.Record) map[int32][]*kgo.Record {
	out := map[int32][]*kgo.Record{}
	for _, r := range recs {
		out[r.Partition] = append(out[r.Partition], r)
	}
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b *kgo.Record) int { return int(a.Offset - b.Offset) })
	}
	return out
}

func openStore(t *testing.T, env Env, url string) (*Store, *store.Dedup) {
	t.Helper()
	u, err := ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	k, d, err := Open(env, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return k, d
}

func counterValue(t testing.TB, c interface{ Write(*dto.Metric) error }) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestAgentBatches: the Kafka-native hop's store side, against a broker.
func TestAgentBatches(t *testing.T) {
	b := kafkatest.Start(t)
	t.Run("Takes", func(t *testing.T) { testAgentBatchesTakes(t, b) })
	t.Run("SameRecords", func(t *testing.T) { testAgentBatchesSameRecords(t, b) })
	t.Run("TooLargeForOneBatch", func(t *testing.T) { testAgentBatchTooLarge(t, b) })
}

// testAgentBatchesTakes: only the store writing its own batches (zstd,
// one header) with agent-records=on takes kafka_zstd bodies as they are;
// the default (off) and franz-go's path (lz4, snappy, none, or
// headers=four, which agent-records=on refuses) do not.
func testAgentBatchesTakes(t *testing.T, b *kafkatest.Broker) {
	for query, want := range map[string]bool{
		"?agent-records=on": true, "?compression=zstd&agent-records=on": true,
		"": false, "?agent-records=off": false, "?compression=lz4": false, "?compression=none": false,
		"?compression=snappy": false, "?headers=four": false,
	} {
		k, _ := openStore(t, testEnv(t), "kafka://"+b.Addr+"/takes"+query)
		if got := store.TakesKafkaRecords(k); got != want {
			t.Errorf("store %s: TakesKafkaRecords %v, want %v", query, got, want)
		}
	}
}

// testAgentBatchesSameRecords: one Append of agents' messages, kafka_zstd
// ones mixed with zstd and plain ones in every partition, lands in the
// topic as the same records (partition, order, key, value, headers) as
// the same messages all sent as zstd write to another topic; each
// kafka_zstd message is a batch holding the agent's compressed bytes as
// they came, nothing was decompressed to write them, and another sink's
// tailer indexes every message while this store's own skips them
// undecoded.
func testAgentBatchesSameRecords(t *testing.T, b *kafkatest.Broker) {
	rng := rand.New(rand.NewPCG(1, 2))
	type spec struct {
		agent string
		id    uint64
		kind  codec.Kind
		recs  [][]byte
	}
	var specs []spec
	kinds := []codec.Kind{codec.Zstd, codec.KafkaZstd, codec.KafkaZstd, codec.Plain, codec.KafkaZstd}
	for i := range 30 {
		agent := fmt.Sprintf("edge-%d", i%5)
		// Random bytes after the name, so that a message's size
		// compressed follows its records: some kafka_zstd messages are
		// below minAgentBatchBytes, some above.
		recs := make([][]byte, 1+rng.IntN(40))
		for j := range recs {
			recs[j] = fmt.Appendf(nil, "%s m%d r%d ", agent, i, j)
			for range 150 {
				recs[j] = append(recs[j], byte(rng.Uint32()))
			}
		}
		specs = append(specs, spec{agent, uint64(100 + i), kinds[(i/5+i)%len(kinds)], recs})
	}
	const query = "?partitions=3"
	ref, _ := openStore(t, testEnv(t), "kafka://"+b.Addr+"/same-zstd"+query)
	envK := testEnv(t)
	skipped := envK.Metrics.TailSkipped
	k, _ := openStore(t, envK, "kafka://"+b.Addr+"/same-agent"+query)
	var refMsgs, msgs []*store.Message
	n, agentBodies, smallKafka := 0, map[int]bool{}, 0
	for _, s := range specs {
		refMsgs = append(refMsgs, agentMsg(t, s.agent, s.id, codec.Zstd, s.recs))
		m := agentMsg(t, s.agent, s.id, s.kind, s.recs)
		msgs = append(msgs, m)
		if s.kind == codec.KafkaZstd {
			if k.agentBatchFits(m) {
				agentBodies[len(m.Body)] = true
			} else {
				smallKafka++
			}
		}
		n += len(s.recs)
	}
	if len(agentBodies) == 0 || smallKafka == 0 {
		t.Fatalf("the test's kafka_zstd messages: %d batches of their own, %d below minAgentBatchBytes; want some of each", len(agentBodies), smallKafka)
	}
	if _, err := ref.Append(refMsgs); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Append(msgs); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.DropErr != nil {
			t.Fatalf("message %s/%d dropped: %v", m.Agent, m.ID, m.DropErr)
		}
	}
	// Only the small ones were decompressed, to join the sink's batches.
	if k.sectionDec == nil {
		t.Error("no kafka_zstd message was decompressed, though some were below minAgentBatchBytes")
	}
	want, _ := readTopic(t, b.Addr, "same-zstd", n)
	got, sizes := readTopic(t, b.Addr, "same-agent", n)
	wantP, gotP := byPartition(want), byPartition(got)
	for p, ws := range wantP {
		gs := gotP[p]
		if len(gs) != len(ws) {
			t.Fatalf("partition %d: %d records, want %d", p, len(gs), len(ws))
		}
		for i, w := range ws {
			g := gs[i]
			if string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) || !slices.EqualFunc(g.Headers, w.Headers,
				func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
				t.Fatalf("partition %d record %d: key %q value %q headers %v; the zstd topic has key %q value %q headers %v",
					p, i, g.Key, g.Value, g.Headers, w.Key, w.Value, w.Headers)
			}
		}
	}
	// The agents' compressed bytes are batches as they came.
	for _, s := range sizes {
		delete(agentBodies, s)
	}
	if len(agentBodies) > 0 {
		t.Errorf("no batch of the compressed size of %d kafka_zstd messages: their bytes were not stored as they came", len(agentBodies))
	}
	// This store's tailer skips its own batches, the agents' included;
	// another sink's decodes them and indexes every message.
	testwait.For(t, "the store's tailer to skip every record it wrote", func() bool { return counterValue(t, skipped) == float64(n) })
	_, other := openStore(t, testEnv(t), "kafka://"+b.Addr+"/same-agent"+query)
	testwait.For(t, "another sink's tailer to index every message", func() bool {
		other.Lock()
		defer other.Unlock()
		for _, s := range specs {
			if !other.Has(s.agent, s.id) {
				return false
			}
		}
		return true
	})
}

// testAgentBatchTooLarge: a kafka_zstd message whose batch would exceed
// the topic's max.message.bytes is decompressed and split into batches
// that fit, like any message, and lands whole and in order.
func testAgentBatchTooLarge(t *testing.T, b *kafkatest.Broker) {
	k, _ := openStore(t, testEnv(t), "kafka://"+b.Addr+"/agent-large")
	// Batches of at most 1,000 bytes of records (with the overhead, 5,096
	// bytes in all); random values, so that the message stays larger
	// compressed.
	k.recordLimit = 1000
	rng := rand.New(rand.NewPCG(3, 4))
	recs := make([][]byte, 100)
	for i := range recs {
		recs[i] = make([]byte, 100)
		for j := range recs[i] {
			recs[i][j] = byte(rng.Uint32())
		}
	}
	small := agentMsg(t, "edge-1", 1, codec.KafkaZstd, recs[:2])
	large := agentMsg(t, "edge-1", 2, codec.KafkaZstd, recs)
	if k.agentBatchFits(large) {
		t.Fatal("the test's large message fits a batch of its own")
	}
	if _, err := k.Append([]*store.Message{small, large}); err != nil {
		t.Fatal(err)
	}
	if large.DropErr != nil {
		t.Fatal(large.DropErr)
	}
	got, sizes := readTopic(t, b.Addr, "agent-large", 102)
	if len(sizes) < 3 {
		t.Errorf("%d batches, want the small message's and several of the large one's", len(sizes))
	}
	for i, r := range got {
		h, ok := ParseHeaders(r.Headers)
		wantID, wantIdx := uint64(1), i
		if i >= 2 {
			wantID, wantIdx = 2, i-2
		}
		wantVal := recs[wantIdx]
		if !ok || h.Message != wantID || int(h.Index) != wantIdx || string(r.Value) != string(wantVal) || string(r.Key) != "edge-1" {
			t.Fatalf("record %d: key %q headers %+v, want message %d index %d", i, r.Key, h, wantID, wantIdx)
		}
	}
}

// TestAgentBatchesExactlyOnceThroughBrokerKill: Appends of kafka_zstd
// messages (mixed with zstd ones in the same partitions) go on while the
// broker is SIGKILLed and restarted; Append waits through the outage and
// re-sends, and afterwards every record of every message is in the topic
// exactly once, each agent's in message order.
func TestAgentBatchesExactlyOnceThroughBrokerKill(t *testing.T) {
	b := kafkatest.Start(t)
	k, _ := openStore(t, testEnv(t), "kafka://"+b.Addr+"/agent-kill?partitions=2")
	agents := []string{"edge-1", "edge-2", "edge-3"}
	const perMsg = 7
	var done atomic.Int64
	var stop atomic.Bool
	errc := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(5, 6))
		id := uint64(0)
		for r := 0; !stop.Load(); r++ {
			var msgs []*store.Message
			for range 3 {
				id++
				for ai, agent := range agents {
					kind := codec.KafkaZstd
					if (int(id)+ai)%3 == 0 {
						kind = codec.Zstd
					}
					// Random bytes after the name: a kafka_zstd
					// message of them is above minAgentBatchBytes
					// compressed, a batch of its own.
					recs := make([][]byte, perMsg)
					for i := range recs {
						recs[i] = fmt.Appendf(nil, "%s m%d i%d ", agent, id, i)
						for range 1000 {
							recs[i] = append(recs[i], byte(rng.Uint32()))
						}
					}
					msgs = append(msgs, agentMsg(t, agent, id, kind, recs))
				}
			}
			if _, err := k.Append(msgs); err != nil {
				errc <- fmt.Errorf("round %d: %w", r, err)
				return
			}
			for _, m := range msgs {
				if m.DropErr != nil {
					errc <- fmt.Errorf("round %d: message %s/%d dropped: %w", r, m.Agent, m.ID, m.DropErr)
					return
				}
			}
			done.Store(int64(id))
		}
		errc <- nil
	}()
	testwait.For(t, "ten rounds appended", func() bool { return done.Load() >= 30 })
	b.Kill() // Appends go on meanwhile: one is cut, or waits for the broker
	b.Restart()
	after := done.Load() + 30
	testwait.For(t, "ten rounds appended after the restart", func() bool { return done.Load() >= after })
	stop.Store(true)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if k.own.w.resends == 0 {
		t.Error("no batch was re-sent: the kill did not meet an Append")
	}
	msgs := int(done.Load())
	recs, _ := readTopic(t, b.Addr, "agent-kill", msgs*len(agents)*perMsg)
	next := map[string]int{} // per agent: records read so far
	for _, r := range recs {
		h, ok := ParseHeaders(r.Headers)
		if !ok {
			t.Fatalf("record at %d/%d without headers", r.Partition, r.Offset)
		}
		agent := string(h.Agent)
		n := next[agent]
		wantID, wantIdx := uint64(n/perMsg+1), n%perMsg
		if h.Message != wantID || int(h.Index) != wantIdx || !strings.HasPrefix(string(r.Value), fmt.Sprintf("%s m%d i%d ", agent, wantID, wantIdx)) {
			t.Fatalf("%s's record %d (partition %d offset %d): message %d index %d %q, want message %d index %d (lost, twice or out of order)",
				agent, n, r.Partition, r.Offset, h.Message, h.Index, r.Value, wantID, wantIdx)
		}
		next[agent] = n + 1
	}
	for _, a := range agents {
		if next[a] != msgs*perMsg {
			t.Errorf("%s: %d records, want %d", a, next[a], msgs*perMsg)
		}
	}
}
