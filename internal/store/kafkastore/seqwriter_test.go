package kafkastore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestSeqWriterExactlyOnceThroughBrokerKill: Writes go on while the broker
// is SIGKILLed and restarted; Write waits through the outage, re-sends
// what was not answered, and when it is over every record is in the topic
// exactly once, in order within each partition (the broker recognised
// the re-sent batches by producer id and sequence). It can fail: with the
// batches stamped without a producer id (no broker-side deduplication; a
// mutation tried by hand) two of three runs stored a re-sent batch twice.
func TestSeqWriterExactlyOnceThroughBrokerKill(t *testing.T) {
	b := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, perBatch = "seq-kill", 20
	createTopic(t, ctx, b.Addr, topic, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := newSeqWriter(cl, topic, "test", 10*time.Second)
	defer w.Close()
	var done atomic.Int64
	var stop atomic.Bool
	errc := make(chan error, 1)
	go func() {
		for r := 0; !stop.Load(); r++ {
			var batches []outBatch
			for p := range int32(2) {
				for k := range 3 {
					vals := make([][]byte, perBatch)
					for i := range vals {
						vals[i] = fmt.Appendf(nil, "p%d r%03d b%d i%02d", p, r, k, i)
					}
					batches = append(batches, outBatch{Partition: p, Data: testBatch(t, []byte("edge-1"), vals)})
				}
			}
			if err := w.Write(ctx, batches); err != nil {
				errc <- fmt.Errorf("round %d: %w", r, err)
				return
			}
			done.Add(1)
		}
		errc <- nil
	}()
	testwait.For(t, "ten rounds written", func() bool { return done.Load() >= 10 })
	pid := w.ProducerID()
	b.Kill() // Writes go on meanwhile: one is cut, or waits for the broker
	b.Restart()
	after := done.Load() + 10
	testwait.For(t, "ten rounds written after the restart", func() bool { return done.Load() >= after })
	stop.Store(true)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if w.resends == 0 {
		t.Error("no batch was re-sent: the kill did not meet a Write")
	}
	if w.ProducerID() != pid {
		t.Errorf("producer id %d after the outage, was %d: a re-send was not settled", w.ProducerID(), pid)
	}
	consumeExactlyOnce(t, ctx, b.Addr, topic, int(done.Load()), perBatch)
}

// consumeExactlyOnce reads the topic and checks that each partition
// holds the values TestSeqWriterExactlyOnceThroughBrokerKill wrote, once
// each and in order.
func consumeExactlyOnce(t *testing.T, ctx context.Context, addr, topic string, rounds, perBatch int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := rounds * 3 * perBatch
	next := map[int32]int{}
	for next[0]+next[1] < 2*want && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n := next[r.Partition]
			exp := fmt.Sprintf("p%d r%03d b%d i%02d", r.Partition, n/(3*perBatch), n/perBatch%3, n%perBatch)
			if string(r.Value) != exp {
				t.Fatalf("partition %d record %d (offset %d): %q, want %q (lost, twice or out of order)", r.Partition, n, r.Offset, r.Value, exp)
			}
			next[r.Partition] = n + 1
		})
		if fs.Empty() && next[0]+next[1] > 0 {
			break
		}
	}
	if next[0] != want || next[1] != want {
		t.Fatalf("read %d and %d records, want %d in each partition", next[0], next[1], want)
	}
}
