package kafkatest

// These tests need Java 17+ (and, on first run, Maven and Maven Central):
// scripts/kafka.sh installs both with apt-get if missing. Without them the
// tests skip, unless SLUICE_KAFKA=require. They run in the normal
// `go test ./...`; a broker start takes about 5 s.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 3
	nRecords   = 1000
)

// topicName is unique per call, so the tests also work against a shared
// broker (SLUICE_KAFKA_BOOTSTRAP).
func topicName(t *testing.T) string {
	return fmt.Sprintf("kafkatest-%s-%d", t.Name(), time.Now().UnixNano())
}

func TestProduceConsumeRestart(t *testing.T) {
	step := stepper(t)
	b := Start(t)
	step("Start")
	topic := topicName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cl := newClient(t, b)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}

	step("create topic")
	produce(ctx, t, b, topic, 0, nRecords)
	step("produce")
	want := consumeAll(ctx, t, b, topic, nRecords)
	step("consume")

	// The group's committed offsets must survive restarts too.
	if got := consumeGroup(ctx, t, b, topic, "g", nRecords); got != nRecords {
		t.Fatalf("group read %d records, want %d", got, nRecords)
	}
	step("consume as group")

	b.Stop()
	step("Stop")
	if c, err := net.DialTimeout("tcp", b.Addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("broker still accepts connections on %s after Stop", b.Addr)
	}
	addr := b.Addr
	b.Restart()
	step("Restart")
	if b.Addr != addr {
		t.Fatalf("address changed across restart: %s -> %s", addr, b.Addr)
	}
	checkSame(t, want, consumeAll(ctx, t, b, topic, nRecords))
	step("consume after restart")

	// A crash (SIGKILL) loses nothing acknowledged with acks=all either: the
	// OS still has the page cache, and the broker recovers the logs.
	produce(ctx, t, b, topic, nRecords, 10)
	step("produce")
	b.Kill()
	step("Kill")
	b.Restart()
	step("Restart")
	all := consumeAll(ctx, t, b, topic, nRecords+10)
	for k, v := range want {
		if all[k] != v {
			t.Fatalf("after kill+restart, record %s = %q, want %q", k, all[k], v)
		}
	}
	if got := consumeGroup(ctx, t, b, topic, "g", 10); got != 10 {
		t.Fatalf("group read %d new records after restarts, want 10", got)
	}
	step("consume all, and as group")
}

// TestStartIsolated checks that two brokers in one test are independent.
func TestStartIsolated(t *testing.T) {
	if os.Getenv("SLUICE_KAFKA_BOOTSTRAP") != "" {
		t.Skip("SLUICE_KAFKA_BOOTSTRAP set: Start does not start brokers")
	}
	a, b := Start(t), Start(t)
	topic := topicName(t)
	if a.Addr == b.Addr || a.dir == b.dir {
		t.Fatalf("two Starts share %s / %s", a.Addr, a.dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// auto.create.topics.enable=true: the topic appears on first produce.
	produce(ctx, t, a, topic, 0, 5, kgo.AllowAutoTopicCreation())
	if got := consumeAll(ctx, t, a, topic, 5); len(got) != 5 {
		t.Fatalf("read %d records from an auto-created topic, want 5", len(got))
	}
	cl := newClient(t, b)
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(topic) {
		t.Fatalf("topic produced to %s shows up on %s", a.Addr, b.Addr)
	}
}

func TestFindRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, ok := findRoot(wd)
	if !ok || !isFile(filepath.Join(root, "scripts", "kafka.sh")) || filepath.Join(root, "internal", "testkit", "kafkatest") != wd {
		t.Fatalf("findRoot(%s) = %q, %v", wd, root, ok)
	}
	if _, ok := findRoot(t.TempDir()); ok {
		t.Fatal("findRoot found a root under an empty temp dir")
	}
}

// stepper returns a func that logs how long each step of a test took.
func stepper(t *testing.T) func(string) {
	last := time.Now()
	return func(what string) {
		t.Helper()
		t.Logf("%-28s %v", what, time.Since(last).Round(time.Millisecond))
		last = time.Now()
	}
}

func newClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	c, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// produce writes records key-i => value-i for i in [from, from+n), with the
// client defaults: acks=all and an idempotent producer.
func produce(ctx context.Context, t *testing.T, b *Broker, topic string, from, n int, opts ...kgo.Opt) {
	t.Helper()
	c := newClient(t, b, append([]kgo.Opt{kgo.DefaultProduceTopic(topic)}, opts...)...)
	defer c.Close()
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{
			Key:   []byte("key-" + strconv.Itoa(i)),
			Value: []byte("value-" + strconv.Itoa(i)),
		})
	}
	if err := c.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads the topic from the start until it has n records and
// returns them as "partition/offset" => "key=value".
func consumeAll(ctx context.Context, t *testing.T, b *Broker, topic string, n int) map[string]string {
	t.Helper()
	c := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer c.Close()
	got := make(map[string]string, n)
	for len(got) < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %d of %d records: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("consume %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = string(r.Key) + "=" + string(r.Value)
		})
	}
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	return got
}

// consumeGroup reads n records as consumer group g, commits them, and
// returns how many it read (n, or fails).
func consumeGroup(ctx context.Context, t *testing.T, b *Broker, topic, g string, n int) int {
	t.Helper()
	c := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(g),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	defer c.Close() // leaves the group
	seen := 0
	for seen < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("group %s: %d of %d records: %v", g, seen, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("group %s: %s/%d: %v", g, topic, p, err)
		})
		seen += fs.NumRecords()
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group %s: commit: %v", g, err)
	}
	return seen
}

func checkSame(t *testing.T, want, got map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("record %s = %q, want %q", k, got[k], v)
		}
	}
}
