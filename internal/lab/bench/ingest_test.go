package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
)

// TestKafkaProducerKeyedRecords: with a key, RunKafkaProducer writes the
// records sluice's Kafka store writes — the key, and one `sluice` header
// naming the key, a message per batch, the record's index and the
// batch's count — so that (c′) gives the broker the same work as (b).
func TestKafkaProducerKeyedRecords(t *testing.T) {
	b := kafkatest.Start(t)
	key := []byte("agent-0123456789abcdef01234567")
	src := func(feeder int) Source {
		n := 0
		return func(dst [][]byte) [][]byte {
			for i := 0; i < 3; i++ {
				dst = append(dst, []byte(fmt.Sprintf("f%d-r%d", feeder, n)))
				n++
			}
			return dst
		}
	}
	res, err := RunKafkaProducer(context.Background(), []string{b.Addr}, "keyed", 300*time.Millisecond, 2, 1<<16, key, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Records == 0 {
		t.Fatal("no records produced")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics("keyed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := int64(0)
	for seen < res.Records {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d of %d records: %v", seen, res.Records, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if string(r.Key) != string(key) || len(r.Headers) != 1 || r.Headers[0].Key != kafkarec.HeaderSluice {
				t.Fatalf("record %q: key %q, headers %v", r.Value, r.Key, r.Headers)
			}
			h, ok := kafkarec.ParseHeaderValue(r.Headers[0].Value)
			if !ok || string(h.Agent) != string(key) || h.Count != 3 || h.Index >= h.Count {
				t.Fatalf("record %q: header %+v (ok %v)", r.Value, h, ok)
			}
		})
	}
}
