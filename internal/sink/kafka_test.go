package sink

// Tests of the Kafka store against a real broker (internal/testkit/kafkatest,
// through scripts/kafka.sh). They skip when Kafka cannot run here, or with
// SLUICE_KAFKA=skip. TestKafka shares one broker among its subtests;
// TestKafkaOutage stops and restarts its own.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/store/kafkastore"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// kafkaWait bounds the blocking steps of Kafka tests (a broker restart is
// several seconds; more on a loaded machine).
const kafkaWait = 60 * time.Second

var topicSeq = time.Now().UnixNano() % 1e6

// newTopic is a topic name unique to the test.
func newTopic(t *testing.T) string {
	topicSeq++
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("sink-%s-%d", name, topicSeq)
}

// kafkaHarness runs a sink whose store is topic on broker b.
func kafkaHarness(t *testing.T, b *kafkatest.Broker, topic string, mod func(*Config)) *harness {
	t.Helper()
	return newHarness(t, func(c *Config) {
		c.Store = "kafka://" + b.Addr + "/" + topic
		if mod != nil {
			mod(c)
		}
	})
}

// kRecord is one record of the topic as a test sees it.
type kRecord struct {
	partition int32
	offset    int64
	key       string
	value     string
	agent     string
	message   uint64
	index     int
	count     int
}

func (r kRecord) id() string { return r.agent + "/" + itoa(r.message) + "/" + strconv.Itoa(r.index) }

// topicRecords reads the whole topic (up to its end offsets now).
func topicRecords(t *testing.T, addr, topic string) []kRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	var out []kRecord
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading topic %s: %v (still to read: %v)", topic, err, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			kr := kRecord{partition: r.Partition, offset: r.Offset, key: string(r.Key), value: string(r.Value)}
			if h, ok := kafkastore.ParseHeaders(r.Headers); ok {
				kr.agent, kr.message, kr.index, kr.count = string(h.Agent), h.Message, int(h.Index), int(h.Count)
			}
			out = append(out, kr)
			if e, ok := left[r.Partition]; ok && r.Offset+1 >= e {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// checkTopic checks that the topic holds exactly the records of msgs (id →
// records), each once, with the right headers and key.
func checkTopic(t *testing.T, addr, topic, agent string, msgs map[uint64][]string) []kRecord {
	t.Helper()
	recs := topicRecords(t, addr, topic)
	seen := map[string]bool{}
	for _, r := range recs {
		if r.agent != agent || r.key != agent {
			t.Fatalf("record %+v: want agent and key %q", r, agent)
		}
		want, ok := msgs[r.message]
		if !ok {
			t.Fatalf("record %+v of a message never sent", r)
		}
		if r.count != len(want) || r.index >= len(want) || r.value != want[r.index] {
			t.Fatalf("record %+v: want count %d, value %q", r, len(want), want[min(r.index, len(want)-1)])
		}
		if seen[r.id()] {
			t.Fatalf("record %s is in the topic twice", r.id())
		}
		seen[r.id()] = true
	}
	n := 0
	for _, w := range msgs {
		n += len(w)
	}
	if len(seen) != n {
		t.Fatalf("topic holds %d records, want %d", len(seen), n)
	}
	return recs
}

// sendAll sends the messages (plain) and waits for all acks.
func sendAll(a *sinkclient.Agent, msgs map[uint64][]string, ids ...uint64) {
	for _, id := range ids {
		a.Send(sinkclient.PlainRequest(id, msgs[id]...))
	}
	a.Collect(ids...)
}

func TestKafka(t *testing.T) {
	b := kafkatest.Start(t)
	t.Run("GroupCommit", func(t *testing.T) { testKafkaGroupCommit(t, b) })
	t.Run("RestartDedup", func(t *testing.T) { testKafkaRestartDedup(t, b) })
	t.Run("TwoSinks", func(t *testing.T) { testKafkaTwoSinks(t, b) })
	t.Run("SentBelowAfterGate", func(t *testing.T) { testKafkaSentBelowAfterGate(t, b) })
	t.Run("Read", func(t *testing.T) { testKafkaRead(t, b) })
	t.Run("Partitions", func(t *testing.T) { testKafkaPartitions(t, b) })
	t.Run("Partial", func(t *testing.T) { testKafkaPartial(t, b) })
	t.Run("TailSkipsOwn", func(t *testing.T) { testKafkaTailSkipsOwn(t, b) })
	t.Run("BadURL", testKafkaBadURL)
}

// testKafkaGroupCommit: messages of every codec, from concurrent streams,
// land in the topic as one record per record with the dedup headers, and
// are acked.
func testKafkaGroupCommit(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	h := kafkaHarness(t, b, topic, nil)
	d := trainDict(t)
	enc := codec.NewEncoder(codec.LevelDefault)
	if err := enc.AddDictionary(d); err != nil {
		t.Fatal(err)
	}
	msgs := map[uint64][]string{}
	a := h.connect("edge-1")
	a.Send(dictUpload(d))
	var ids []uint64
	for id := range uint64(60) {
		recs := sinkclient.Records(id, 1+int(id%7))
		msgs[id] = recs
		ids = append(ids, id)
		body := sinkclient.Body(recs...)
		req := &sluicev1.Request{Version: 1, MessageId: id, RecordCount: uint32(len(recs))}
		switch id % 3 {
		case 0:
			req.Payload = &sluicev1.Request_Plain{Plain: body}
		case 1:
			z, err := enc.Encode(nil, body, codec.Zstd, 0)
			if err != nil {
				t.Fatal(err)
			}
			req.Payload = &sluicev1.Request_Zstd{Zstd: z}
		case 2:
			z, err := enc.Encode(nil, body, codec.ZstdDict, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			req.Payload = &sluicev1.Request_ZstdDict{ZstdDict: &sluicev1.ZstdDict{DictionaryId: d.ID, Data: z}}
		}
		a.Send(req)
	}
	a.Collect(ids...)
	recs := checkTopic(t, b.Addr, topic, "edge-1", msgs)
	// One agent's records are in one partition, each message's records
	// in order.
	last := map[uint64]int{}
	for _, r := range recs {
		if i, ok := last[r.message]; ok && r.index != i+1 {
			t.Fatalf("message %d: record %d after %d", r.message, r.index, i)
		}
		last[r.message] = r.index
	}
	if got := metricValue(t, h, "sluice_sink_store_available"); got != 1 {
		t.Errorf("store_available %v, want 1", got)
	}
	if h.s.Store() != nil {
		t.Error("Store() is not nil with a Kafka store")
	}
}

// testKafkaRestartDedup: after a restart (with and without a checkpoint)
// the dedup index is rebuilt from the topic: resent messages are acked, not
// written again.
func testKafkaRestartDedup(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	h := kafkaHarness(t, b, topic, func(c *Config) { c.CheckpointBytes = 1 })
	msgs := map[uint64][]string{}
	for id := range uint64(12) {
		msgs[id] = sinkclient.Records(id, 3)
	}
	a := h.connect("edge-1")
	sendAll(a, msgs, 0, 1, 2, 3, 4, 5)

	resend := func(name string, ids ...uint64) {
		t.Helper()
		h.restart()
		a := h.connect("edge-1")
		sendAll(a, msgs, ids...)
		if dup := metricValue(t, h, "sluice_sink_duplicate_messages_total"); dup == 0 {
			t.Errorf("%s: no duplicates counted", name)
		}
	}
	resend("after a clean restart", 3, 4, 5, 6, 7)
	ckpt := filepath.Join(h.cfg.DataDir, kafkastore.CheckpointName)
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatalf("no Kafka checkpoint: %v", err)
	}
	h.stop()
	if err := os.Remove(ckpt); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.stop() // a start without checkpoint; then a damaged one
	if err := os.WriteFile(ckpt, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.start()
	a = h.connect("edge-1")
	sendAll(a, msgs, 0, 6, 7, 8)
	if !strings.Contains(h.logs.String(), "dedup checkpoint unreadable") {
		t.Error("no warning about the damaged checkpoint")
	}
	delete(msgs, 9)
	delete(msgs, 10)
	delete(msgs, 11)
	checkTopic(t, b.Addr, topic, "edge-1", msgs)
}

// testKafkaTwoSinks: an agent writes through sink A, then resends the same
// ids through sink B; B learned them from the topic and does not write
// them again. Then B writes new ones and A, tailing, knows them too.
func testKafkaTwoSinks(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	ha := kafkaHarness(t, b, topic, nil)
	msgs := map[uint64][]string{}
	for id := range uint64(10) {
		msgs[id] = sinkclient.Records(id, 4)
	}
	a := ha.connect("edge-1")
	sendAll(a, msgs, 0, 1, 2, 3, 4)
	a.Cancel()
	// The agent fails over to B, started just now, and resends everything
	// not acked (here: all of it, as if the acks were lost). B's tailer
	// is held: B has not read the topic when the Hello arrives, and must
	// not write the messages until it has.
	hold := make(chan struct{})
	hb := kafkaHarness(t, b, topic, func(c *Config) { c.tailHold = hold })
	bb := hb.connect("edge-1")
	for _, id := range []uint64{0, 1, 2, 3, 4, 5, 6} {
		bb.Send(sinkclient.PlainRequest(id, msgs[id]...))
	}
	// B cannot ack before its tailer is released (quiet: a window, see
	// its comment).
	for range 3 {
		select {
		case r := <-bb.Resps:
			if r.GetAck() != nil {
				t.Fatalf("sink B acked %v before reading the topic", r.GetAck())
			}
		case <-time.After(quiet):
		}
	}
	close(hold)
	bb.Collect(0, 1, 2, 3, 4, 5, 6)
	if dup := metricValue(t, hb, "sluice_sink_duplicate_messages_total"); dup != 5 {
		t.Errorf("sink B counted %v duplicates, want 5", dup)
	}
	// Back to A.
	a = ha.connect("edge-1")
	sendAll(a, msgs, 5, 6, 7, 8, 9)
	msgs2 := maps(msgs)
	checkTopic(t, b.Addr, topic, "edge-1", msgs2)
}

// testKafkaSentBelowAfterGate: a sink that has not yet read the topic
// when a Hello arrives cannot know the ids other sinks stored; once its
// gate opens it checks the Hello's bound on sent ids against all of them,
// and ends the session of a spool that never sent ids another sink stored
// under its agent id (FailedPrecondition), before storing any of its
// messages.
func testKafkaSentBelowAfterGate(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	ha := kafkaHarness(t, b, topic, nil)
	msgs := map[uint64][]string{}
	for id := range uint64(5) {
		msgs[id] = sinkclient.Records(id, 2)
	}
	a := ha.connect("edge-9")
	sendAll(a, msgs, 0, 1, 2, 3, 4)
	a.Cancel()
	hold := make(chan struct{})
	hb := kafkaHarness(t, b, topic, func(c *Config) { c.tailHold = hold })
	bb := sinkclient.OpenAgent(t, hb.client)
	bb.Send(helloSentBelow("edge-9", 2))
	if w := bb.Next().GetWelcome(); w == nil {
		t.Fatal("no Welcome before the gate")
	}
	bb.Send(sinkclient.PlainRequest(0, "another spool's message 0"))
	close(hold)
	if err := bb.Status(); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "message ids taken") {
		t.Fatalf("after the gate: %v, want FailedPrecondition", err)
	}
	checkTopic(t, b.Addr, topic, "edge-9", maps(msgs))
}

func maps(m map[uint64][]string) map[uint64][]string {
	out := make(map[uint64][]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// testKafkaRead: Sink.Read on a Kafka store returns the records as
// written, one StoredMessage per message, with packed offsets; from_offset
// and groups (committed in Kafka) work; copies written twice are left out.
func testKafkaRead(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	h := kafkaHarness(t, b, topic, nil)
	msgs := map[uint64][]string{}
	var ids []uint64
	var want []string
	for id := range uint64(20) {
		msgs[id] = sinkclient.Records(id, 1+int(id%4))
		ids = append(ids, id)
		want = append(want, msgs[id]...)
	}
	a := h.connect("edge-1")
	sendAll(a, msgs, ids...)

	read := func(start *sluicev1.ReadStart, credits uint32) ([]*sluicev1.StoredMessage, *sluicev1.EndOfLog, *sinkclient.Reader) {
		t.Helper()
		r := h.read(start)
		r.Request(credits)
		var got []*sluicev1.StoredMessage
		for {
			m := r.Next()
			if e := m.GetEnd(); e != nil {
				return got, e, r
			}
			got = append(got, m.GetMessage())
		}
	}
	got, end, r := read(&sluicev1.ReadStart{}, 1000)
	if err := r.Status(); err != nil {
		t.Fatal(err)
	}
	var recs []string
	for i, m := range got {
		if m.AgentId != "edge-1" || m.MessageId != uint64(i) {
			t.Fatalf("message %d: %s/%d", i, m.AgentId, m.MessageId)
		}
		recs = append(recs, strs(m.Records)...)
	}
	if !slices.Equal(recs, want) {
		t.Fatalf("read %d records %q..., want %d", len(recs), recs[:min(3, len(recs))], len(want))
	}
	total := uint64(len(want))
	if end.NextOffset != total || got[len(got)-1].Offset != total-1 {
		t.Fatalf("end %d, last offset %d; want %d, %d", end.NextOffset, got[len(got)-1].Offset, total, total-1)
	}

	// From an offset: the messages from there on.
	got, _, _ = read(&sluicev1.ReadStart{FromOffset: got[10].Offset + 1}, 1000)
	if len(got) != 9 || got[0].MessageId != 11 {
		t.Fatalf("from offset: %d messages, first %d", len(got), got[0].GetMessageId())
	}
	r = h.read(&sluicev1.ReadStart{FromOffset: total + 5})
	if err := r.Status(); status.Code(err) != codes.OutOfRange {
		t.Fatalf("from beyond the end: %v", err)
	}

	// A group: commit half way, resume there.
	r = h.read(&sluicev1.ReadStart{Group: "g1", FromCommitted: true})
	r.Request(5)
	var off uint64
	for range 5 {
		off = r.Next().GetMessage().GetOffset()
	}
	r.Commit(off + 1)
	if err := r.Stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := r.Status(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("group read closed early: %v", err)
	}
	got, _, r = read(&sluicev1.ReadStart{Group: "g1", FromCommitted: true}, 1000)
	r.Stream.CloseSend()
	if err := r.Status(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 15 || got[0].MessageId != 5 {
		t.Fatalf("resumed group read: %d messages, first %d", len(got), got[0].GetMessageId())
	}

	// Following: new messages arrive after the EndOfLog; closing our side
	// ends the stream.
	r = h.read(&sluicev1.ReadStart{Follow: true, FromOffset: total})
	r.Request(100)
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != total {
		t.Fatalf("follow from the end: %v, want EndOfLog{%d}", e, total)
	}
	msgs[20] = sinkclient.Records(20, 3)
	sendAll(a, msgs, 20)
	if m := r.Next().GetMessage(); m == nil || m.MessageId != 20 || !slices.Equal(strs(m.Records), msgs[20]) || m.Offset != total+2 {
		t.Fatalf("followed %v", m)
	}
	if e := r.Next().GetEnd(); e == nil || e.NextOffset != total+3 {
		t.Fatalf("after the new message: %v, want EndOfLog{%d}", e, total+3)
	}
	r.Stream.CloseSend()
	if err := r.Status(); err != nil {
		t.Fatalf("follow ended with %v", err)
	}
	want = append(want, msgs[20]...)

	// A copy written by another producer (as after a failover) is in the
	// topic twice, but read once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, rec := range msgs[3] {
		r := &kgo.Record{Key: []byte("edge-1"), Value: []byte(rec), Headers: []kgo.RecordHeader{
			{Key: kafkastore.HeaderAgent, Value: []byte("edge-1")}, {Key: kafkastore.HeaderMessage, Value: []byte("3")},
			{Key: kafkastore.HeaderIndex, Value: []byte(strconv.Itoa(i))}, {Key: kafkastore.HeaderCount, Value: []byte(strconv.Itoa(len(msgs[3])))}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got, _, _ = read(&sluicev1.ReadStart{}, 1000)
	recs = recs[:0]
	for _, m := range got {
		recs = append(recs, strs(m.Records)...)
	}
	if !slices.Equal(recs, want) || len(got) != 22 || len(got[21].Records) != 0 {
		t.Fatalf("with a copy in the topic: %d messages, %d records", len(got), len(recs))
	}
}

// testKafkaPartitions: with several partitions, agents spread over them;
// a read returns everything; a single from_offset is refused.
func testKafkaPartitions(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	h := kafkaHarness(t, b, topic+"?partitions=4", nil)
	var want []string
	for ag := range 8 {
		a := h.connect("edge-" + strconv.Itoa(ag))
		msgs := map[uint64][]string{}
		for id := range uint64(3) {
			msgs[id] = sinkclient.Records(id, 2)
			for _, r := range msgs[id] {
				want = append(want, "edge-"+strconv.Itoa(ag)+" "+r)
			}
		}
		sendAll(a, msgs, 0, 1, 2)
	}
	recs := topicRecords(t, b.Addr, topic)
	parts := map[int32]bool{}
	agentPart := map[string]int32{}
	for _, r := range recs {
		parts[r.partition] = true
		if p, ok := agentPart[r.agent]; ok && p != r.partition {
			t.Fatalf("agent %s in partitions %d and %d", r.agent, p, r.partition)
		}
		agentPart[r.agent] = r.partition
	}
	if len(parts) < 2 {
		t.Errorf("8 agents all in one partition of 4")
	}
	r := h.read(&sluicev1.ReadStart{})
	r.Request(1000)
	var got []string
	for {
		m := r.Next()
		if m.GetEnd() != nil {
			break
		}
		for _, rec := range m.GetMessage().GetRecords() {
			got = append(got, m.GetMessage().GetAgentId()+" "+string(rec))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	r = h.read(&sluicev1.ReadStart{FromOffset: 3})
	if err := r.Status(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "4 partitions") {
		t.Fatalf("from_offset on 4 partitions: %v", err)
	}
}

// testKafkaPartial: a message of which only some records are in the topic
// (a sink died in the middle of writing it) is not taken as stored; once
// written whole it is.
func testKafkaPartial(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	recs := sinkclient.Records(0, 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, rec := range recs[:2] {
		r := &kgo.Record{Key: []byte("edge-9"), Value: []byte(rec), Headers: []kgo.RecordHeader{
			{Key: kafkastore.HeaderAgent, Value: []byte("edge-9")}, {Key: kafkastore.HeaderMessage, Value: []byte("0")},
			{Key: kafkastore.HeaderIndex, Value: []byte(strconv.Itoa(i))}, {Key: kafkastore.HeaderCount, Value: []byte("3")}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	h := kafkaHarness(t, b, topic, nil)
	a := h.connect("edge-9")
	a.Send(sinkclient.PlainRequest(0, recs...))
	a.Collect(0)
	if dup := metricValue(t, h, "sluice_sink_duplicate_messages_total"); dup != 0 {
		t.Fatalf("a partly written message was taken as stored")
	}
	h.restart() // the index, rebuilt, has it whole (from the second write)
	a = h.connect("edge-9")
	a.Send(sinkclient.PlainRequest(0, recs...))
	a.Collect(0)
	if dup := metricValue(t, h, "sluice_sink_duplicate_messages_total"); dup != 1 {
		t.Fatalf("the message written whole was not known after a restart")
	}
	if n := len(topicRecords(t, b.Addr, topic)); n != 5 {
		t.Fatalf("topic holds %d records, want 2 + 3", n)
	}
}

// testKafkaTailSkipsOwn: the tailer does not decode the batches the sink's
// own producer wrote (the writer indexed their messages), but still reads
// what another producer writes to the topic: a message written by another
// sink is known as stored, and so are the sink's own, also after a restart
// from the checkpoint (whose positions are past the skipped batches).
func testKafkaTailSkipsOwn(t *testing.T, b *kafkatest.Broker) {
	topic := newTopic(t)
	h := kafkaHarness(t, b, topic, func(c *Config) { c.CheckpointBytes = 1 })
	msgs := map[uint64][]string{}
	var ids []uint64
	for id := range uint64(10) {
		msgs[id] = sinkclient.Records(id, 3)
		ids = append(ids, id)
	}
	a := h.connect("edge-1")
	sendAll(a, msgs, ids...)

	// Another sink stores message 0 of edge-7 (two records).
	other := sinkclient.Records(0, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, rec := range other {
		r := &kgo.Record{Key: []byte("edge-7"), Value: []byte(rec), Headers: []kgo.RecordHeader{
			{Key: kafkastore.HeaderAgent, Value: []byte("edge-7")}, {Key: kafkastore.HeaderMessage, Value: []byte("0")},
			{Key: kafkastore.HeaderIndex, Value: []byte(strconv.Itoa(i))}, {Key: kafkastore.HeaderCount, Value: []byte("2")}}}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (decoded, skipped float64) {
		return metricValue(t, h, "sluice_sink_kafka_tail_records_total"), metricValue(t, h, "sluice_sink_kafka_tail_own_records_skipped_total")
	}
	if !testwait.Until(func() bool { d, s := read(); return d >= 2 && s >= 30 }) {
		d, s := read()
		t.Fatalf("tailer decoded %v records and skipped %v; want the other sink's 2 decoded and the own 30 skipped", d, s)
	}
	if d, s := read(); d != 2 || s != 30 {
		t.Fatalf("tailer decoded %v records and skipped %v; want 2 and 30", d, s)
	}
	b7 := h.connect("edge-7")
	sendAll(b7, map[uint64][]string{0: other}, 0)
	if dup := metricValue(t, h, "sluice_sink_duplicate_messages_total"); dup != 1 {
		t.Fatalf("the other sink's message: %v duplicates, want 1", dup)
	}
	h.restart()
	a = h.connect("edge-1")
	sendAll(a, msgs, ids...)
	if dup := metricValue(t, h, "sluice_sink_duplicate_messages_total"); dup != 10 {
		t.Fatalf("after a restart: %v duplicates, want 10", dup)
	}
	if n := len(topicRecords(t, b.Addr, topic)); n != 32 {
		t.Fatalf("topic holds %d records, want 30 + 2", n)
	}
}

func testKafkaBadURL(t *testing.T) {
	for _, s := range []string{
		"kafka://", "kafka://host:1", "kafka://host/topic", "kafka://host:0/t", "kafka://:9092/t",
		"kafka://h:9092/bad topic", "kafka://h:9092/t?partitions=0", "kafka://h:9092/t?foo=1", "kafka2://h:1/t", "embeded",
	} {
		_, err := New(Config{DataDir: t.TempDir(), Store: s})
		if err == nil || !strings.Contains(err.Error(), "store") {
			t.Errorf("Store %q: %v", s, err)
		}
	}
}

// TestKafkaOutage: the broker stops while an agent sends. The sink tells
// the agent the store is unavailable and stops granting credits (nothing
// is acked, nothing failed); when the broker is back, everything is
// stored once and acked.
func TestKafkaOutage(t *testing.T) {
	// Restored last, after the sink is closed (cleanups run in reverse).
	t.Cleanup(setKafkaTimings(200*time.Millisecond, time.Second, time.Second))
	b := kafkatest.Start(t)
	topic := newTopic(t)
	h := kafkaHarness(t, b, topic, func(c *Config) { c.QueueMessages = 8 })
	a := h.connect("edge-1")
	limit := a.Welcome.GetCredits().GetMessageLimit()
	msgs := map[uint64][]string{}
	for id := range uint64(40) {
		msgs[id] = sinkclient.Records(id, 3)
	}
	sendAll(a, msgs, 0, 1, 2, 3)
	limit += 4 // four acked: the queue has room again (grants follow)

	b.Stop()
	// Send within the credits we have; they are queued, not acked.
	next := uint64(4)
	for ; next < limit; next++ {
		a.Send(sinkclient.PlainRequest(next, msgs[next]...))
	}
	var statuses []*sluicev1.StoreStatus
	granted := uint64(0)
	deadline := time.After(kafkaWait)
	for len(statuses) == 0 {
		select {
		case r, ok := <-a.Resps:
			if !ok {
				t.Fatalf("stream ended: %v", <-a.End)
			}
			if st := r.GetInfo().GetStoreStatus(); st != nil {
				statuses = append(statuses, st)
			}
			if c := r.GetInfo().GetCredits(); c != nil {
				granted = max(granted, c.MessageLimit)
			}
			if e := r.GetInfo().GetError(); e != nil {
				t.Fatalf("message failed during the outage: %v", e)
			}
			if ack := r.GetAck(); ack != nil {
				t.Logf("ack during the outage (before Kafka noticed): %v", ack)
			}
		case <-deadline:
			t.Fatal("no store_status during the outage")
		}
	}
	if statuses[0].Available || statuses[0].Detail == "" {
		t.Fatalf("store_status %v, want unavailable with a reason", statuses[0])
	}
	if got := metricValue(t, h, "sluice_sink_store_available"); got != 0 {
		t.Errorf("store_available %v during the outage", got)
	}
	if err := h.s.Ready(); err == nil || !strings.Contains(err.Error(), "Kafka store unavailable") {
		t.Errorf("Ready during the outage: %v, want the store's unavailability", err)
	}
	if !strings.Contains(h.logs.String(), "store unavailable") {
		t.Error("no log of the outage")
	}
	// Nothing is acked or granted while Kafka is away. A negative check
	// can only watch for a while: two probe periods here, so that a probe
	// wrongly reporting the store back would be seen; on a slow machine it
	// may miss a bug, never fail a correct sink (Kafka stays down until
	// the test restarts it).
	quietUntil := time.After(2 * time.Second)
quiet:
	for {
		select {
		case r := <-a.Resps:
			if r.GetAck() != nil || r.GetInfo().GetCredits().GetMessageLimit() > max(granted, limit) || r.GetInfo().GetError() != nil {
				t.Fatalf("during the outage: %v", r)
			}
		case <-quietUntil:
			break quiet
		}
	}
	// A new agent connecting meanwhile is told at once.
	c := h.connect("edge-2")
	if st := c.Next().GetInfo().GetStoreStatus(); st == nil || st.Available {
		t.Fatalf("new agent during the outage got %v first, want store_status unavailable", st)
	}

	b.Restart()
	var pending []uint64
	for id := uint64(4); id < next; id++ {
		pending = append(pending, id)
	}
	infos := collectWithin(t, a, kafkaWait, pending...)
	back := false
	for _, in := range infos {
		if st := in.GetStoreStatus(); st != nil && st.Available {
			back = true
		}
	}
	if !back {
		// It may come after the acks.
		deadline := time.After(kafkaWait)
		for !back {
			select {
			case r := <-a.Resps:
				back = r.GetInfo().GetStoreStatus().GetAvailable()
			case <-deadline:
				t.Fatal("no store_status available after the outage")
			}
		}
	}
	if err := h.s.Ready(); err != nil {
		t.Errorf("Ready once the store is back: %v", err)
	}
	// Delivery resumes.
	var rest []uint64
	for id := next; id < next+4; id++ {
		rest = append(rest, id)
	}
	sendAll(a, msgs, rest...)
	for id := next + 4; id < 40; id++ {
		delete(msgs, id)
	}
	checkTopic(t, b.Addr, topic, "edge-1", msgs)
	if os.Getenv("SINK_TEST_LOGS") != "" {
		t.Log(h.logs.String())
	}
}

// setKafkaTimings shortens the health monitor's timings; the returned
// function restores them.
func setKafkaTimings(every, timeout, stall time.Duration) func() {
	e, to, st := kafkastore.ProbeEvery, kafkastore.ProbeTimeout, kafkastore.StallAfter
	kafkastore.ProbeEvery, kafkastore.ProbeTimeout, kafkastore.StallAfter = every, timeout, stall
	return func() { kafkastore.ProbeEvery, kafkastore.ProbeTimeout, kafkastore.StallAfter = e, to, st }
}

// collectWithin is a.Collect with a longer bound for each response.
func collectWithin(t testing.TB, a *sinkclient.Agent, d time.Duration, ids ...uint64) []*sluicev1.ServiceMessage {
	t.Helper()
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var infos []*sluicev1.ServiceMessage
	deadline := time.After(d)
	for len(want) > 0 {
		select {
		case r, ok := <-a.Resps:
			if !ok {
				t.Fatalf("stream ended: %v", <-a.End)
			}
			if info := r.GetInfo(); info != nil {
				if e := info.GetError(); e != nil {
					t.Fatalf("message error: %v", e)
				}
				infos = append(infos, info)
				continue
			}
			for _, rg := range r.GetAck().GetRanges() {
				for id := rg.First; id <= rg.Last; id++ {
					delete(want, id)
				}
			}
		case <-deadline:
			t.Fatalf("not acked within %v: %d of %d", d, len(want), len(ids))
		}
	}
	return infos
}
