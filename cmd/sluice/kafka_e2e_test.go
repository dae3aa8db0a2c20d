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

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkatest"
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

// topicRecords reads every record of topic; it returns the values after
// dropping duplicates by the (agent, message, index) headers, and how many
// raw records there were.
func topicRecords(t *testing.T, addr, topic string) (dedup []string, raw int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	idle := 0
	for idle < 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			raw++
			h := map[string]string{}
			for _, hd := range r.Headers {
				h[hd.Key] = string(hd.Value)
			}
			key := h["sluice-agent"] + "/" + h["sluice-message"] + "/" + h["sluice-index"]
			if h["sluice-agent"] == "" || h["sluice-message"] == "" || h["sluice-index"] == "" {
				t.Fatalf("record without dedup headers: %v", r.Headers)
			}
			if !seen[key] {
				seen[key] = true
				dedup = append(dedup, string(r.Value))
			}
		})
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return dedup, raw
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

// waitTopic waits until the topic holds every input record (after dedup).
func waitTopic(t *testing.T, addr, topic string, n int, timeout time.Duration) ([]string, int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, raw := topicRecords(t, addr, topic)
		if len(got) >= n || time.Now().After(deadline) {
			return got, raw
		}
		time.Sleep(time.Second)
	}
}

func runProduce(t *testing.T, ingest, input string) chan error {
	cmd := exec.Command(sluiceBin, "produce", "--agent", ingest, "--file", input, "--batch-bytes", "64KiB")
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

// TestKafkaSinkCrash: 100k records through agent → Kafka-backed sink; the
// sink is SIGKILLed while delivering and restarted; every record is in the
// topic, and after dedup by header exactly once.
func TestKafkaSinkCrash(t *testing.T) {
	broker := kafkatest.Start(t)
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	dir := t.TempDir()
	input, want := kafkaInput(t, dir, n)
	topic := "e2e-crash"
	store := "kafka://" + broker.Addr + "/" + topic
	sinkAddr, ingest, agentMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--store", store)
	start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"), "--ingest", ingest,
		"--metrics", agentMetrics, "--max-message", "32KiB", "--min-rto", "500ms")
	produced := runProduce(t, ingest, input)
	acked := func() float64 { return metric(agentMetrics, "sluice_agent_acked_records_total") }
	waitFor(t, "acks through Kafka", 2*time.Minute, func() bool { return acked() > 0 })
	t.Logf("SIGKILL sink after %.0f records acked", acked())
	sink.restart()
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	got, raw := waitTopic(t, broker.Addr, topic, n, 3*time.Minute)
	t.Logf("topic: %d records, %d after dedup by header", raw, len(got))
	sameMultiset(t, got, want)
}

// TestKafkaBrokerRestart: the broker goes away during delivery and comes
// back; the agent's spool absorbs the outage and nothing is lost.
func TestKafkaBrokerRestart(t *testing.T) {
	broker := kafkatest.Start(t)
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	dir := t.TempDir()
	input, want := kafkaInput(t, dir, n)
	topic := "e2e-broker"
	sinkAddr, ingest, agentMetrics := freeAddr(t), freeAddr(t), freeAddr(t)
	sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"), "--store", "kafka://"+broker.Addr+"/"+topic)
	start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"), "--ingest", ingest,
		"--metrics", agentMetrics, "--max-message", "32KiB")
	produced := runProduce(t, ingest, input)
	acked := func() float64 { return metric(agentMetrics, "sluice_agent_acked_records_total") }
	waitFor(t, "acks through Kafka", 2*time.Minute, func() bool { return acked() > 0 })
	broker.Stop()
	t.Logf("broker stopped after %.0f records acked", acked())
	// Ingest keeps working while Kafka is down: produce finishes.
	if err := <-produced; err != nil {
		t.Fatalf("produce during the outage: %v", err)
	}
	before := acked()
	time.Sleep(2 * time.Second)
	if acked() > before+1000 {
		t.Errorf("acks kept coming while the broker was down: %.0f → %.0f", before, acked())
	}
	broker.Restart()
	got, raw := waitTopic(t, broker.Addr, topic, n, 3*time.Minute)
	t.Logf("topic: %d records, %d after dedup by header; sink log:\n%s", raw, len(got), tail(sink.log.String(), 10))
	sameMultiset(t, got, want)
}

// TestKafkaTwoSinks: two sinks on one topic, an agent failing over between
// them as each is SIGKILLed in turn; nothing lost, and after dedup by
// header exactly once.
func TestKafkaTwoSinks(t *testing.T) {
	broker := kafkatest.Start(t)
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	dir := t.TempDir()
	input, want := kafkaInput(t, dir, n)
	topic := "e2e-two-sinks"
	store := "kafka://" + broker.Addr + "/" + topic
	a, b := freeAddr(t), freeAddr(t)
	ingest, agentMetrics := freeAddr(t), freeAddr(t)
	sinkA := start(t, "sink-a", "sink", "--listen", a, "--data", filepath.Join(dir, "sink-a"), "--store", store)
	sinkB := start(t, "sink-b", "sink", "--listen", b, "--data", filepath.Join(dir, "sink-b"), "--store", store)
	start(t, "agent", "agent", "--sink", a+","+b, "--spool", filepath.Join(dir, "spool"), "--ingest", ingest,
		"--metrics", agentMetrics, "--max-message", "32KiB", "--min-rto", "500ms")
	produced := runProduce(t, ingest, input)
	acked := func() float64 { return metric(agentMetrics, "sluice_agent_acked_records_total") }
	last := 0.0
	for round, s := range []*proc{sinkA, sinkB, sinkA} {
		waitFor(t, "progress", 2*time.Minute, func() bool { return acked() > last })
		last = acked()
		t.Logf("round %d: SIGKILL %s after %.0f records acked", round, s.name, last)
		s.restart()
	}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	got, raw := waitTopic(t, broker.Addr, topic, n, 3*time.Minute)
	t.Logf("topic: %d records, %d after dedup by header (%d duplicates written across sinks)", raw, len(got), raw-len(got))
	sameMultiset(t, got, want)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
