package kafkastore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/lab/metricsgen"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// testBatch encodes values as one zstd-compressed Kafka v2 record batch
// (key, one header sluice, offset deltas 0..n-1), with kmsg's encoders
// and its own CRC-32C: a stand-in for the batches the sink will build
// from an agent's records.
func testBatch(t testing.TB, key []byte, values [][]byte) []byte {
	t.Helper()
	var section []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Key: key, Value: v,
			Headers: []kmsg.Header{{Key: HeaderSluice, Value: []byte{1, byte(i)}}}}
		body := r.AppendTo(nil)[1:] // Length 0 encodes as one byte
		section = kbin.AppendVarint(section, int32(len(body)))
		section = append(section, body...)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	compressed := enc.EncodeAll(section, nil)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic: 2, Attributes: int16(kgo.CodecZstd), LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: compressed,
	}
	b.Length = int32(49 + len(compressed))
	out := b.AppendTo(nil)
	crc := crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli))
	out[17], out[18], out[19], out[20] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return out
}

// TestRawProduceInOrder: batches produced back to back over one
// connection, many unanswered at once, land in the order produced, with
// the offsets their answers gave, and read back record for record with
// franz-go's consumer (so any Kafka consumer reads what the sink will
// write this way).
func TestRawProduceInOrder(t *testing.T) {
	b := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, batches, perBatch = "raw-order", 200, 50
	createTopic(t, ctx, b.Addr, topic, 1)
	p, err := dialRaw(ctx, b.Addr, topic, "test", 8, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var mu sync.Mutex
	var offsets []int64
	var wg sync.WaitGroup
	for i := range batches {
		vals := make([][]byte, perBatch)
		for j := range vals {
			vals[j] = fmt.Appendf(nil, "batch %d record %d", i, j)
		}
		wg.Add(1)
		if err := p.Produce(0, testBatch(t, []byte("edge-1"), vals), func(off int64, err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("batch %d: %v", i, err)
			}
			mu.Lock()
			offsets = append(offsets, off)
			mu.Unlock()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, off := range offsets {
		if off != int64(i*perBatch) {
			t.Fatalf("answer %d: base offset %d, want %d (answers out of order or batches lost)", i, off, i*perBatch)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for n < batches*perBatch && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("batch %d record %d", n/perBatch, n%perBatch)
			if string(r.Value) != want || r.Offset != int64(n) || string(r.Key) != "edge-1" ||
				len(r.Headers) != 1 || r.Headers[0].Key != HeaderSluice {
				t.Fatalf("record %d: offset %d key %q value %q headers %v, want %q", n, r.Offset, r.Key, r.Value, r.Headers, want)
			}
			n++
		})
	}
	if n != batches*perBatch {
		t.Fatalf("read %d records, want %d", n, batches*perBatch)
	}
}

// TestRawProduceBrokerError: a batch Kafka refuses (a partition the
// topic does not have) fails alone, and the connection goes on.
func TestRawProduceBrokerError(t *testing.T) {
	b := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createTopic(t, ctx, b.Addr, "raw-err", 1)
	p, err := dialRaw(ctx, b.Addr, "raw-err", "test", 8, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	errs := make(chan error, 2)
	batch := testBatch(t, []byte("edge-1"), [][]byte{[]byte("x")})
	for _, part := range []int32{7, 0} {
		if err := p.Produce(part, batch, func(_ int64, err error) { errs <- err }); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errs; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Errorf("partition 7: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
	if err := <-errs; err != nil {
		t.Errorf("partition 0 after the refused batch: %v", err)
	}
}

func createTopic(t testing.TB, ctx context.Context, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	// CreateTopic answers before the broker leads the new partitions: a
	// produce then gets NOT_LEADER_FOR_PARTITION (a CI run did). ListOffsets
	// goes where a produce goes, so its success says the leaders serve.
	testwait.For(t, "the new topic's partitions to have their leader", func() bool {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		return len(ends[topic]) == int(partitions)
	})
}

// TestRawProduceFailsEveryPendingOnce: when the connection drops with
// requests unanswered, each one's callback runs exactly once with an
// error, and the next Produce is refused. No broker: a listener that
// answers ApiVersions, reads three requests and hangs up.
func TestRawProduceFailsEveryPendingOnce(t *testing.T) {
	p := dialFakeBroker(t, 3)
	calls := make([]int, 3)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		if err := p.Produce(0, []byte("batch"), func(_ int64, err error) {
			if err == nil {
				t.Errorf("request %d answered without error", i)
			}
			calls[i]++
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, n := range calls {
		if n != 1 {
			t.Errorf("request %d: callback ran %d times", i, n)
		}
	}
	if err := p.Produce(0, []byte("batch"), func(int64, error) { t.Error("callback of a refused Produce") }); err == nil {
		t.Error("Produce on a failed connection accepted")
	}
}

// TestRawProduceUnansweredFails: a broker that reads a request and
// never answers (frozen, or the connection half open) fails it once
// answerWithin has passed, rather than holding the writer forever.
func TestRawProduceUnansweredFails(t *testing.T) {
	p := dialFakeBroker(t, 1<<30) // reads, never answers, never closes
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.answerWithin = 100 * time.Millisecond // the writer's bound, shortened; not a wait of the test's own
	errs := make(chan error, 1)
	if err := p.Produce(0, []byte("batch"), func(_ int64, err error) { errs <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("unanswered request failed with %v, want a timeout", err)
		}
	case <-ctx.Done():
		t.Fatal("an unanswered request was held past its bound")
	}
}

// dialFakeBroker connects a rawProducer to fakeBrokerHangsUpAfter(n),
// closed when the test ends.
func dialFakeBroker(t *testing.T, n int) *rawProducer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go fakeBrokerHangsUpAfter(ln, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := dialRaw(ctx, ln.Addr().String(), "t", "test", 8, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// fakeBrokerHangsUpAfter answers one connection's ApiVersions request,
// reads n more requests without answering and closes it.
func fakeBrokerHangsUpAfter(ln net.Listener, n int) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	readReq := func() (corr int32, ok bool) {
		var head [12]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return 0, false
		}
		size := int(head[0])<<24 | int(head[1])<<16 | int(head[2])<<8 | int(head[3])
		rest := make([]byte, size-8)
		if _, err := io.ReadFull(c, rest); err != nil {
			return 0, false
		}
		return int32(uint32(head[8])<<24 | uint32(head[9])<<16 | uint32(head[10])<<8 | uint32(head[11])), true
	}
	corr, ok := readReq()
	if !ok {
		return
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 12}}
	body := kbin.AppendInt32(nil, corr)
	body = resp.AppendTo(body)
	if _, err := c.Write(append(kbin.AppendInt32(nil, int32(len(body))), body...)); err != nil {
		return
	}
	for range n {
		if _, ok := readReq(); !ok {
			return
		}
	}
}

// BenchmarkProduceCeiling measures what the Kafka-native hop can reach at
// most: the broker fed batches compressed beforehand over rawProducer
// ("raw"), the same plus what the sink must still do per message
// ("raw+decompress": decompress the agent's records to check them, and
// CRC-32C the batch), against franz-go's producer given the same records
// with zstd, configured as `sluice bench ingest`'s row (c) is. One op is
// one 256 KiB message of bench ingest's 200-byte records (1,310); the
// broker runs on the same cores, as in bench ingest. Reports records/s
// and this process's CPU µs per record.
//
//	SLUICE_KAFKA=require go test -run XXX -bench ProduceCeiling -benchtime 2000x -count 3 ./internal/store/kafkastore/
func BenchmarkProduceCeiling(b *testing.B) {
	br := kafkatest.Start(b)
	const perBatch, size = 1310, 200
	// bench ingest's records (benchkit.FixedSizeSource, which this
	// package's tests cannot import: it imports the sink): metric lines
	// cut or padded to 200 bytes.
	g, err := metricsgen.New(metricsgen.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	recs := make([][]byte, 32*perBatch)
	for i := range recs {
		line := g.AppendRecord(nil)
		for len(line) < size {
			line = append(line, ' ')
		}
		recs[i] = line[:size]
	}
	batches := make([][]byte, 32)
	for i := range batches {
		batches[i] = testBatch(b, []byte("edge-1"), recs[i*perBatch:(i+1)*perBatch])
	}
	ctx := context.Background()
	report := func(b *testing.B, start time.Time, cpu0 int64) {
		n := float64(b.N * perBatch)
		b.ReportMetric(n/time.Since(start).Seconds(), "records/s")
		b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/n, "cpu-µs/record")
	}
	b.Run("franz-go", func(b *testing.B) {
		topic := fmt.Sprintf("ceiling-franz-%d", ceilingTopics.Add(1))
		createTopic(b, ctx, br.Addr, topic, 1)
		cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr), kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
			kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(256<<10))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		var failed atomicErr
		promise := func(_ *kgo.Record, err error) { failed.set(err) }
		start, cpu0 := time.Now(), processCPU(b)
		for i := 0; b.Loop(); i++ {
			for _, v := range recs[(i%32)*perBatch : (i%32+1)*perBatch] {
				cl.Produce(ctx, &kgo.Record{Key: []byte("edge-1"), Value: v}, promise)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		report(b, start, cpu0)
		if err := failed.get(); err != nil {
			b.Fatal(err)
		}
	})
	for _, check := range []bool{false, true} {
		name := "raw"
		if check {
			name = "raw+decompress"
		}
		b.Run(name, func(b *testing.B) {
			topic := fmt.Sprintf("ceiling-raw-%d", ceilingTopics.Add(1))
			createTopic(b, ctx, br.Addr, topic, 1)
			p, err := dialRaw(ctx, br.Addr, topic, "bench", 8, 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				b.Fatal(err)
			}
			defer dec.Close()
			var section []byte
			var failed atomicErr
			var wg sync.WaitGroup
			done := func(_ int64, err error) { failed.set(err); wg.Done() }
			castagnoli := crc32.MakeTable(crc32.Castagnoli)
			start, cpu0 := time.Now(), processCPU(b)
			for i := 0; b.Loop(); i++ {
				batch := batches[i%32]
				if check {
					if section, err = dec.DecodeAll(batch[61:], section[:0]); err != nil {
						b.Fatal(err)
					}
					_ = crc32.Checksum(batch[21:], castagnoli)
				}
				wg.Add(1)
				if err := p.Produce(0, batch, done); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
			report(b, start, cpu0)
			if err := failed.get(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// ceilingTopics numbers the benchmark's topics: each run needs a new one.
var ceilingTopics atomic.Int64

// atomicErr keeps the first error set.
type atomicErr struct {
	mu  sync.Mutex
	err error
}

func (a *atomicErr) set(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
}

func (a *atomicErr) get() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}
