package kafkastore

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// recordBatch is an encoded record batch (magic 2) of producer pid holding
// n records from offset base; control marks a transaction marker batch.
func recordBatch(base int64, n int32, pid int64, control bool) []byte {
	rb := kmsg.RecordBatch{FirstOffset: base, Magic: 2, LastOffsetDelta: n - 1, ProducerID: pid, NumRecords: n,
		Records: bytes.Repeat([]byte{0}, int(n))}
	if control {
		rb.Attributes = 0x20
	}
	b := rb.AppendTo(nil)
	rb.Length = int32(len(b) - 12)
	b = rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestSplitOwnDecodesDamagedBatch: a batch of the producer whose CRC does
// not match is not skipped (its offsets cannot be trusted): it stays in
// the stretch to decode, whose decoder reports the damage.
func TestSplitOwnDecodesDamagedBatch(t *testing.T) {
	other := recordBatch(0, 3, 9, false)
	mine := recordBatch(3, 4, 7, false)
	mine[23] ^= 0x7f // lastOffsetDelta: the position would jump
	in := append(append([]byte{}, other...), mine...)
	if segs := splitOwn(in, 7); len(segs) != 1 || !bytes.Equal(segs[0].data, in) {
		t.Fatalf("a damaged batch of ours: %d segments, want everything to decode", len(segs))
	}
}

// TestSplitOwn: the batches of the sink's producer are cut out of a fetch,
// each as one segment to skip with the offset after it and its record
// count; the batches between, another producer's or a transaction marker of
// ours, stay together to be decoded, and so does a trailing batch Kafka cut
// short. With no producer id known (-1), nothing is skipped.
func TestSplitOwn(t *testing.T) {
	other1 := recordBatch(0, 3, 9, false)
	mine1 := recordBatch(3, 4, 7, false)
	mine2 := recordBatch(7, 2, 7, false)
	marker := recordBatch(9, 1, 7, true)
	other2 := recordBatch(10, 5, 9, false)
	cut := recordBatch(15, 2, 7, false)[:40]
	var in []byte
	for _, b := range [][]byte{other1, mine1, mine2, marker, other2, cut} {
		in = append(in, b...)
	}
	segs := splitOwn(in, 7)
	want := []segment{
		{data: other1},
		{next: 7, records: 4},
		{next: 9, records: 2},
		{data: append(append(append([]byte{}, marker...), other2...), cut...)},
	}
	if len(segs) != len(want) {
		t.Fatalf("%d segments, want %d: %+v", len(segs), len(want), segs)
	}
	for i, s := range segs {
		w := want[i]
		if !bytes.Equal(s.data, w.data) || s.next != w.next || s.records != w.records {
			t.Fatalf("segment %d: %d bytes, next %d, %d records; want %d bytes, next %d, %d records",
				i, len(s.data), s.next, s.records, len(w.data), w.next, w.records)
		}
	}
	if segs := splitOwn(in, -1); len(segs) != 1 || !bytes.Equal(segs[0].data, in) {
		t.Fatalf("no producer id: %d segments", len(segs))
	}
	if segs := splitOwn(nil, 7); len(segs) != 0 {
		t.Fatalf("nothing fetched: %d segments", len(segs))
	}
}

// FuzzSplitOwn: a fetch's bytes come from the brokers, and a batch header
// from whoever wrote it. splitOwn never panics, and what it keeps to decode
// is the input less whole batches of the producer, in order: the data
// segments are consecutive pieces of the input, and only complete
// batches fall between them.
func FuzzSplitOwn(f *testing.F) {
	f.Add(append(recordBatch(0, 3, 9, false), recordBatch(3, 2, 7, false)...), int64(7))
	f.Add(recordBatch(5, 1, 7, true), int64(7))
	f.Add(recordBatch(0, 2, 7, false)[:62], int64(7))
	f.Fuzz(func(t *testing.T, in []byte, own int64) {
		at := 0
		for _, s := range splitOwn(in, own) {
			if s.data == nil {
				continue
			}
			i := bytes.Index(in[at:], s.data)
			if len(s.data) == 0 || i < 0 {
				t.Fatalf("a data segment of %d bytes is not a piece of the input after byte %d", len(s.data), at)
			}
			at += i + len(s.data)
		}
		if own < 0 {
			if segs := splitOwn(in, own); len(in) > 0 && (len(segs) != 1 || !bytes.Equal(segs[0].data, in)) {
				t.Fatalf("no producer id, yet %d segments", len(segs))
			}
		}
	})
}

// TestFailedAppendRewindsTailer: the tailer skips the batches of the
// store's own producer, whose messages the writer adds to the index once
// Append succeeds (here nothing adds them: the store alone never does).
// When an Append fails, records of it may be in the topic all the same —
// here a small message's, acknowledged beside a record the producer refuses
// — and the writer adds none of its messages: the tailer reads the topic
// again from where it stood when that Append began, and learns the small
// message as it would another sink's.
func TestFailedAppendRewindsTailer(t *testing.T) {
	b := kafkatest.Start(t)
	u, err := ParseURL("kafka://" + b.Addr + "/rewind")
	if err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	skipped := prometheus.NewCounter(prometheus.CounterOpts{Name: "skipped_total"})
	env.Metrics.TailSkipped = skipped
	k, d, err := Open(env, u)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	msg := func(id uint64, recs ...[]byte) *store.Message {
		var bb batch.Builder
		for _, r := range recs {
			if err := bb.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		return &store.Message{Agent: "edge-1", AgentB: []byte("edge-1"), ID: id, Records: uint32(len(recs)),
			Codec: codec.Plain, Body: bytes.Clone(bb.Bytes())}
	}
	has := func(id uint64) bool {
		d.Lock()
		defer d.Unlock()
		return d.Has("edge-1", id)
	}
	count := func(c prometheus.Counter) float64 {
		var m dto.Metric
		if err := c.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	if _, err := k.Append([]*store.Message{msg(1, []byte("a"), []byte("b"))}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the tailer to skip message 1's two records", func() bool { return count(skipped) == 2 })
	if has(1) || count(env.Metrics.TailRecords) != 0 {
		t.Fatalf("the tailer decoded the store's own batch (%v records)", count(env.Metrics.TailRecords))
	}
	// A record larger than the topic takes, which Append's own check
	// would refuse: Kafka refuses it (MESSAGE_TOO_LARGE). Random bytes, so
	// that it stays too large compressed: Kafka's limit is on the batch as
	// stored.
	k.recordLimit = 1 << 30
	huge := make([]byte, int(env.MaxMessageBytes)+1<<20)
	for i := range huge {
		huge[i] = byte(rand.Uint32())
	}
	if _, err := k.Append([]*store.Message{msg(2, []byte("c")), msg(3, huge)}); err == nil {
		t.Fatal("an Append with a record larger than the topic takes succeeded")
	}
	testwait.For(t, "the tailer to read message 2 again", func() bool { return has(2) })
	if has(1) || has(3) {
		t.Fatalf("index: message 1 %v (before the rewind point), message 3 %v (never written); want neither", has(1), has(3))
	}
	// From now on the store's batches are read like any other's.
	if _, err := k.Append([]*store.Message{msg(4, []byte("d"))}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the tailer to read message 4", func() bool { return has(4) })
}

// TestTailerLogStartAndNewPartitions: records deleted before the tailer
// read them (its position is below the partition's log start: Kafka
// answers OFFSET_OUT_OF_RANGE) are passed over and the tailer reads on from
// the log start; a partition added to the topic later is read from its
// start. Another producer writes every record here, so each is decoded.
func TestTailerLogStartAndNewPartitions(t *testing.T) {
	b := kafkatest.Start(t)
	const topic = "tail-log-start"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	other, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	adm := kadm.NewClient(other)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	write := func(partition int32, id uint64) {
		t.Helper()
		r := &kgo.Record{Partition: partition, Key: []byte("edge-9"), Value: []byte("v"), Headers: []kgo.RecordHeader{
			{Key: HeaderAgent, Value: []byte("edge-9")}, {Key: HeaderMessage, Value: []byte(strconv.FormatUint(id, 10))},
			{Key: HeaderIndex, Value: []byte("0")}, {Key: HeaderCount, Value: []byte("1")}}}
		if err := other.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 1)
	write(0, 2)
	// Retention, as it were, deletes message 1 before any sink read it.
	if _, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {At: 1}}}); err != nil {
		t.Fatal(err)
	}
	u, err := ParseURL("kafka://" + b.Addr + "/" + topic)
	if err != nil {
		t.Fatal(err)
	}
	k, d, err := Open(testEnv(t), u)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	has := func(id uint64) bool {
		d.Lock()
		defer d.Unlock()
		return d.Has("edge-9", id)
	}
	testwait.For(t, "the tailer to read message 2, after the log start", func() bool { return has(2) })
	if has(1) {
		t.Fatal("the index holds message 1, deleted before the tailer could read it")
	}
	if _, err := adm.CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the other producer to write to the new partition", func() bool {
		other.ForceMetadataRefresh()
		r := &kgo.Record{Partition: 1, Key: []byte("edge-9"), Value: []byte("v"), Headers: []kgo.RecordHeader{
			{Key: HeaderAgent, Value: []byte("edge-9")}, {Key: HeaderMessage, Value: []byte("3")},
			{Key: HeaderIndex, Value: []byte("0")}, {Key: HeaderCount, Value: []byte("1")}}}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return other.ProduceSync(pctx, r).FirstErr() == nil
	})
	testwait.For(t, "the tailer to read message 3 from the new partition", func() bool { return has(3) })
}
