package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafkarec"
)

// ProducerResult is a run of franz-go's producer straight to Kafka.
type ProducerResult struct {
	Records, Bytes int64
	Elapsed        time.Duration
	// AckP50 and AckP99: from a batch's first Produce to the broker's
	// acks=all answer for its last record, one sample per batch (as
	// sluice's ingest latency is one sample per Ingest call).
	AckP50, AckP99 time.Duration
	// MachineBusy is the share of the machine's CPUs busy during the run,
	// after its first second (ReadMachineCPU; -1 where unknown).
	MachineBusy float64
}

func (r ProducerResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }
func (r ProducerResult) MBps() float64          { return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6 }

// RunKafkaProducer produces the sources' records to topic with an
// idempotent franz-go producer, acks=all, zstd batches of up to batchBytes
// (give it the agent's message size) and the agent's linger, from `feeders`
// goroutines that each wait for their batch's acks before producing the
// next (as an agent's producers wait for Ingest).
//
// With a key, every record is the record sluice's Kafka store writes for
// the same value: that key (an agent id) and the one `sluice` header of
// a message id (one per batch), the record's index and the batch's count
// (kafkarec.AppendHeaderValue) — the same bytes for the broker to take,
// decompress, check and store as the sink's records, which the bare
// values of a run without a key are not.
func RunKafkaProducer(ctx context.Context, brokers []string, topic string, dur time.Duration, feeders, batchBytes int, key []byte, newSource func(int) Source, progress io.Writer) (ProducerResult, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(int32(batchBytes)), kgo.AllowAutoTopicCreation())
	if err != nil {
		return ProducerResult{}, err
	}
	defer cl.Close()
	var mu sync.Mutex
	lat := hdrhistogram.New(1, 60_000_000, 3)
	var recs, bytes atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error] // atomic.Value panics on errors of different types
	start := time.Now()
	cpu0, cpuOK := ReadMachineCPU()
	for f := 0; f < feeders; f++ {
		src := newSource(f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch [][]byte
			var kr []kgo.Record
			var headerValues []byte
			var headers []kgo.RecordHeader
			message := uint64(f) << 40 // a feeder's own message ids, as an agent's spool offsets
			for runCtx.Err() == nil {
				batch = src(batch[:0])
				if len(batch) == 0 {
					continue
				}
				// Per batch, as sluice's side pays them (pipeline.go: one
				// Ingest call, one latency sample per batch): the records
				// point at the source's bytes without a copy (the batch is
				// acknowledged before the source is asked for the next one,
				// and franz-go lets go of a record once its promise ran), one
				// record slice reused, one promise, one histogram sample when
				// the whole batch is acknowledged.
				kr = slices.Grow(kr[:0], len(batch))[:len(batch)]
				var left atomic.Int64
				left.Store(int64(len(batch)))
				var size int64
				done := make(chan struct{})
				t0 := time.Now()
				promise := func(_ *kgo.Record, err error) {
					if err != nil {
						firstErr.CompareAndSwap(nil, &err)
					}
					if left.Add(-1) == 0 {
						close(done)
					}
				}
				if key != nil {
					// One buffer for the batch's header values, kept until
					// every record is acknowledged: franz-go holds a
					// record's slices until its promise runs.
					message++
					headerValues = headerValues[:0]
					headers = slices.Grow(headers[:0], len(batch))[:len(batch)]
					for i := range batch {
						headerValues = kafkarec.AppendHeaderValue(headerValues, kafkarec.RecordHeaders{Agent: key, Message: message, Index: uint32(i), Count: uint32(len(batch))})
					}
				}
				hv := headerValues
				for i, r := range batch {
					kr[i] = kgo.Record{Value: r}
					if key != nil {
						n := kafkarec.HeaderValueLen(kafkarec.RecordHeaders{Agent: key, Message: message, Index: uint32(i), Count: uint32(len(batch))})
						headers[i] = kgo.RecordHeader{Key: kafkarec.HeaderSluice, Value: hv[:n:n]}
						kr[i].Key, kr[i].Headers = key, headers[i:i+1:i+1]
						hv = hv[n:]
					}
					size += int64(len(r))
					cl.Produce(ctx, &kr[i], promise)
				}
				<-done
				if firstErr.Load() != nil {
					return
				}
				d := time.Since(t0)
				mu.Lock()
				_ = lat.RecordValue(max(d.Microseconds(), 1))
				mu.Unlock()
				recs.Add(int64(len(batch)))
				bytes.Add(size)
			}
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	prev := int64(0)
	rampedUp := false
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			if !rampedUp {
				// Counted from the first tick, as RunPipeline does.
				rampedUp = true
				if c, ok := ReadMachineCPU(); ok {
					cpu0 = c
				}
			}
			if progress != nil {
				n := recs.Load()
				fmt.Fprintf(progress, "  [franz-go] %5.1fs  %9d rec/s\n", time.Since(start).Seconds(), n-prev)
				prev = n
			}
		}
	}
	if p := firstErr.Load(); p != nil {
		return ProducerResult{}, *p
	}
	busy := -1.0
	if cpu1, ok := ReadMachineCPU(); ok && cpuOK {
		busy = cpu1.BusySince(cpu0)
	}
	return ProducerResult{Records: recs.Load(), Bytes: bytes.Load(), Elapsed: time.Since(start), MachineBusy: busy,
		AckP50: time.Duration(lat.ValueAtQuantile(50)) * time.Microsecond,
		AckP99: time.Duration(lat.ValueAtQuantile(99)) * time.Microsecond}, nil
}
