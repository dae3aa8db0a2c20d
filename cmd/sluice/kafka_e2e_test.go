package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/store/kafkastore"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// kafkaInput writes n unique lines to a file and returns them.
func kafkaInput(t *testing.T, dir string, n int) (string, []string) {
	t.Helper()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var want []string
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("rec-%06d http_requests_total{code=\"%d\"} %d", i, 200+rng.Intn(300), rng.Int63())
		want = append(want, line)
		buf.WriteString(line + "\n")
	}
	path := filepath.Join(dir, "input.txt")
	os.WriteFile(path, buf.Bytes(), 0o644)
	return path, want
}

// topicRecords reads topic from the start until it holds want distinct
// records (after dropping duplicates by the (agent, message, index)
// headers), then on up to the end offsets listed at that moment, so that
// duplicates and strays already written count too. It returns the distinct
// values and how many raw records it read; past timeout it returns what it
// has (the caller's comparison then fails with the counts).
func topicRecords(t *testing.T, addr, topic string, want int, timeout time.Duration) (dedup []string, raw int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	next := map[int32]int64{} // per partition: the offset after the last record read
	var ends map[int32]int64  // listed once want distinct records are read
	for {
		if ends == nil && len(dedup) >= want {
			listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
			if err == nil {
				err = listed.Error()
			}
			if err != nil {
				t.Logf("listing the end offsets of %s: %v", topic, err)
				return dedup, raw
			}
			ends = map[int32]int64{}
			listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
		}
		if ends != nil {
			done := true
			for p, end := range ends {
				done = done && next[p] >= end
			}
			if done {
				return dedup, raw
			}
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Logf("reading %s: gave up after %v with %d of %d records", topic, timeout, len(dedup), want)
			return dedup, raw
		}
		fs.EachRecord(func(r *kgo.Record) {
			raw++
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			h, ok := kafkastore.ParseHeaders(r.Headers)
			if !ok {
				t.Fatalf("record without dedup headers: %v", r.Headers)
			}
			key := fmt.Sprintf("%s/%d/%d", h.Agent, h.Message, h.Index)
			if !seen[key] {
				seen[key] = true
				dedup = append(dedup, string(r.Value))
			}
		})
	}
}

func sameMultiset(t *testing.T, got, want []string) {
	t.Helper()
	sort.Strings(got)
	w := append([]string(nil), want...)
	sort.Strings(w)
	if len(got) != len(w) {
		t.Fatalf("after dedup by header the topic holds %d records, input had %d", len(got), len(w))
	}
	for i := range w {
		if got[i] != w[i] {
			t.Fatalf("record %d differs: %q vs %q", i, got[i], w[i])
		}
	}
}

func startProduce(t *testing.T, ingest, input string) chan error {
	// Small requests (each waits for a spool fsync) keep produce running
	// long enough for the crashes to land mid-delivery.
	cmd := exec.Command(sluiceBin, "produce", "--agent", ingest, "--file", input, "--batch-bytes", "4KiB")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, out.String())
		}
		done <- err
	}()
	return done
}

// kafkaRun is one end-to-end setup: a broker, n input records, sinks on
// one topic, an agent sending to them (failing over in list order), and
// `sluice produce` running.
type kafkaRun struct {
	broker   *kafkatest.Broker
	topic    string
	want     []string
	sinks    []*proc
	sinkMets []string // the sinks' metrics addresses
	metrics  string   // the agent's metrics address
	produced chan error
}

func startKafkaRun(t *testing.T, topic string, n, sinks int) *kafkaRun {
	t.Helper()
	return startKafkaRunQuery(t, topic, "", n, sinks)
}

// startKafkaRunQuery is startKafkaRun with a query (such as
// "?agent-records=on") on the sinks' store URL.
func startKafkaRunQuery(t *testing.T, topic, query string, n, sinks int) *kafkaRun {
	t.Helper()
	r := &kafkaRun{broker: kafkatest.Start(t), topic: topic}
	dir := t.TempDir()
	var input string
	input, r.want = kafkaInput(t, dir, n)
	store := "kafka://" + r.broker.Addr + "/" + topic + query
	var addrs []string
	for i := 0; i < sinks; i++ {
		addr := freeAddr(t)
		addrs = append(addrs, addr)
		mets := freeAddr(t)
		r.sinkMets = append(r.sinkMets, mets)
		r.sinks = append(r.sinks, start(t, fmt.Sprintf("sink-%d", i), "sink", "--listen", addr, "--metrics", mets,
			"--data", filepath.Join(dir, fmt.Sprintf("sink-%d", i)), "--store", store))
	}
	ingest := freeAddr(t)
	r.metrics = freeAddr(t)
	start(t, "agent", "agent", "--sink", strings.Join(addrs, ","), "--spool", filepath.Join(dir, "spool"),
		"--ingest", ingest, "--metrics", r.metrics, "--max-message", "32KiB", "--min-rto", "500ms")
	r.produced = startProduce(t, ingest, input)
	return r
}

func (r *kafkaRun) acked() float64 { return metric(r.metrics, "sluice_agent_acked_records_total") }

// midDelivery waits until some records are acked and checks that not all
// are, so a crash injected next lands in the middle of the delivery.
func (r *kafkaRun) midDelivery(t *testing.T, after float64) float64 {
	t.Helper()
	testwait.For(t, "acks through Kafka", func() bool { return r.acked() > after })
	n := r.acked()
	if n >= float64(len(r.want)) {
		t.Fatalf("all %d records were delivered before the crash could be injected", len(r.want))
	}
	return n
}

// finish waits for produce and for every record in the topic, and checks
// the topic against the input.
func (r *kafkaRun) finish(t *testing.T) {
	t.Helper()
	if err := <-r.produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	got, raw := topicRecords(t, r.broker.Addr, r.topic, len(r.want), 3*time.Minute)
	t.Logf("topic: %d records, %d after dedup by header", raw, len(got))
	sameMultiset(t, got, r.want)
}

// TestKafkaSinkCrash: 100k records through agent → Kafka-backed sink; the
// sink is SIGKILLed while delivering and restarted; every record is in the
// topic, and after dedup by header exactly once.
func TestKafkaSinkCrash(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	r := startKafkaRun(t, "e2e-crash", n, 1)
	t.Logf("SIGKILL sink after %.0f records acked", r.midDelivery(t, 0))
	if v := metric(r.metrics, "sluice_agent_seal_kafka_records"); v != 0 {
		t.Errorf("sluice_agent_seal_kafka_records %v with the store's default (agent-records off), want 0", v)
	}
	r.sinks[0].restart()
	r.finish(t)
}

// TestKafkaSinkCrashAgentRecords: TestKafkaSinkCrash with the store's
// agent-records=on, where the agent seals its messages as Kafka records
// sections (sluice_agent_seal_kafka_records = 1) and the sink puts them in
// the topic as they came: every record is there, and after dedup by
// header exactly once.
func TestKafkaSinkCrashAgentRecords(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	r := startKafkaRunQuery(t, "e2e-crash-agent", "?agent-records=on", n, 1)
	sealing := func() bool { return metric(r.metrics, "sluice_agent_seal_kafka_records") == 1 }
	testwait.For(t, "the agent sealing Kafka records (the sink's Welcome asks)", sealing)
	t.Logf("SIGKILL sink after %.0f records acked", r.midDelivery(t, 0))
	r.sinks[0].restart()
	r.finish(t)
	if !sealing() {
		t.Error("after the sink's restart the agent no longer seals Kafka records")
	}
}

// TestKafkaBrokerRestart: the broker goes away during delivery and comes
// back; the agent's spool absorbs the outage and nothing is lost.
func TestKafkaBrokerRestart(t *testing.T) {
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	r := startKafkaRun(t, "e2e-broker", n, 1)
	t.Logf("stopping the broker after %.0f records acked", r.midDelivery(t, 0))
	producing := true
	select {
	case err := <-r.produced:
		r.produced <- err
		producing = false
	default:
	}
	r.broker.Stop()
	// The sink notices (a failed probe or a stalled commit) and withholds
	// credits: wait for that signal rather than watching acks for a while.
	avail := func() float64 { return metric(r.sinkMets[0], "sluice_sink_store_available") }
	testwait.For(t, "the sink to report Kafka unavailable", func() bool { return avail() == 0 })
	// Ingest keeps working while Kafka is down: produce finishes.
	if err := <-r.produced; err != nil {
		t.Fatalf("produce during the outage: %v", err)
	}
	r.produced <- nil // finish waits on it again
	// Every record is ingested and Kafka is still down, so the spool must
	// hold some unacknowledged: an ack for each would mean acks without
	// Kafka. (Unless produce ended before the broker stopped, when all
	// could have been delivered honestly.)
	if avail() != 0 {
		t.Fatal("the sink reports its store available with the broker down")
	}
	if acked := r.acked(); producing && acked >= float64(len(r.want)) {
		t.Errorf("all %.0f records acked while the broker was down", acked)
	}
	r.broker.Restart()
	testwait.For(t, "the sink to report Kafka available again", func() bool { return avail() == 1 })
	if n := metric(r.sinkMets[0], "sluice_sink_store_outages_total"); n < 1 {
		t.Errorf("store_outages_total %v after an outage", n)
	}
	r.finish(t)
}

// TestKafkaTwoSinks: two sinks on one topic, an agent failing over between
// them as each is SIGKILLed in turn; nothing lost, and after dedup by
// header exactly once.
func TestKafkaTwoSinks(t *testing.T) {
	n := 50_000 // enough that three crashes land before the end, also with -short
	r := startKafkaRun(t, "e2e-two-sinks", n, 2)
	last := 0.0
	for round, s := range []*proc{r.sinks[0], r.sinks[1], r.sinks[0]} {
		last = r.midDelivery(t, last)
		t.Logf("round %d: SIGKILL %s after %.0f records acked", round, s.name, last)
		s.restart()
	}
	r.finish(t)
}
