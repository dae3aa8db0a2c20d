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
)

// ProducerResult is a run of franz-go's producer straight to Kafka.
type ProducerResult struct {
	Records, Bytes int64
	Elapsed        time.Duration
	// AckP50 and AckP99: from a batch's first Produce to the broker's
	// acks=all answer for its last record, one sample per batch (as
	// sluice's ingest latency is one sample per Ingest call).
	AckP50, AckP99 time.Duration
}

func (r ProducerResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }
func (r ProducerResult) MBps() float64          { return float64(r.Bytes) / r.Elapsed.Seconds() / 1e6 }

// RunKafkaProducer produces the sources' records to topic with an
// idempotent franz-go producer, acks=all, zstd batches of up to batchBytes
// (give it the agent's message size) and the agent's linger, from `feeders`
// goroutines that each wait for their batch's acks before producing the
// next (as an agent's producers wait for Ingest).
func RunKafkaProducer(ctx context.Context, brokers []string, topic string, dur time.Duration, feeders, batchBytes int, newSource func(int) Source, progress io.Writer) (ProducerResult, error) {
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
	for f := 0; f < feeders; f++ {
		src := newSource(f)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch [][]byte
			var kr []kgo.Record
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
				for i, r := range batch {
					kr[i] = kgo.Record{Value: r}
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
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
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
	return ProducerResult{Records: recs.Load(), Bytes: bytes.Load(), Elapsed: time.Since(start),
		AckP50: time.Duration(lat.ValueAtQuantile(50)) * time.Microsecond,
		AckP99: time.Duration(lat.ValueAtQuantile(99)) * time.Microsecond}, nil
}
