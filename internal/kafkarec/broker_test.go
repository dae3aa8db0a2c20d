package kafkarec_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store/kafkastore"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
)

// TestBrokerTakesBatch: a real Kafka broker (scripts/kafka.sh), which
// checks every batch it is given (CRC, decompression, each record's offset
// and timestamp), takes the batches of the Kafka-native hop in a produce
// request of our own, one per compressor setup, and a franz-go consumer
// reads the records back with their keys, values, headers and offsets.
func TestBrokerTakesBatch(t *testing.T) {
	br := kafkatest.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A generous bound for a loaded machine; the test waits for
	// outcomes, never for time.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "native-hop"
	var created kadm.CreateTopicResponse
	err = kafkastore.Retry(ctx, func(ctx context.Context) error {
		created, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			err = created.Err
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	agent := []byte("edge-9")
	var bb batch.Builder
	var values [][]byte
	for i := range 500 {
		v := fmt.Appendf(nil, "mem,host=h%d free=%d", i%3, i*7)
		values = append(values, v)
		if err := bb.Add(v); err != nil {
			t.Fatal(err)
		}
	}
	ts := time.Now().Truncate(time.Millisecond)
	var sent int
	for name, compress := range compressors(t) {
		message := uint64(sent/len(values) + 1)
		section, n, err := kafkarec.AppendRecords(nil, bb.Bytes(), agent, message)
		if err != nil {
			t.Fatal(err)
		}
		b, err := kafkarec.AppendBatch(nil, kafkarec.BatchHeader{Records: n, Timestamp: ts.UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, compress(section))
		if err != nil {
			t.Fatal(err)
		}
		produce(ctx, t, cl, topic, created.ID, b, name)
		sent += n
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < sent && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if ctx.Err() == nil {
				t.Fatalf("fetch: %v", e.Err)
			}
		}
		got = append(got, fs.Records()...)
	}
	if len(got) != sent {
		t.Fatalf("read %d records of %d", len(got), sent)
	}
	for j, r := range got {
		i, message := j%len(values), uint64(j/len(values)+1)
		h, ok := kafkastore.ParseHeaders(r.Headers)
		if r.Offset != int64(j) || !r.Timestamp.Equal(ts) || !bytes.Equal(r.Key, agent) || !bytes.Equal(r.Value, values[i]) || len(r.Headers) != 1 ||
			!ok || !bytes.Equal(h.Agent, agent) || h.Message != message || int(h.Index) != i || int(h.Count) != len(values) {
			t.Fatalf("record %d: offset %d, time %v, key %q, value %q, headers %+v", j, r.Offset, r.Timestamp, r.Key, r.Value, h)
		}
	}
}

// produce sends one record batch to partition 0 of topic with acks=all
// and fails the test unless the broker takes it.
func produce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, id [16]byte, b []byte, name string) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id // by name before Produce v13, by id from it
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	err := kafkastore.Retry(ctx, func(ctx context.Context) error {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("answer for %d topics", len(resp.Topics))
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			msg := ""
			if p.ErrorMessage != nil {
				msg = *p.ErrorMessage
			}
			return fmt.Errorf("%w (%s)", err, msg)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: the broker refused the batch: %v", name, err)
	}
}
