package kafkastore

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/lab/metricsgen"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
)

// BenchmarkNativeHop measures, in isolation, what the Kafka-native hop of
// issue 27 would save: the CPU per record of the sink's path from the
// agent's compressed message to a compressed Kafka record batch, and what
// it would cost the agent. On bench ingest's records (200 B metric lines,
// 256 KiB messages: `sluice bench ingest`'s defaults):
//
//   - sink=today: decompress the agent's message (codec, as the sink's
//     store.BodyDecoder does), batch.Decode it into kgo.Records with their
//     sluice header (split and produce), then encode and compress them as
//     franz-go would, approximated by kafkarec.AppendRecords (Kafka's
//     record encoding of the same records), the batchCompressor (zstd at
//     its fastest level, what the sink's producer uses) and
//     kafkarec.AppendBatch (the batch header and its CRC-32C). franz-go's
//     producer bookkeeping per record (buffering, promises, its own
//     encoder) is not counted: today's figure is a lower bound.
//   - sink=native: decompress the agent's zstd of the records section,
//     check every record (kafkarec.Records), and put the agent's
//     compressed bytes behind a batch header (kafkarec.AppendBatch: a copy
//     and the CRC-32C).
//   - agent=body: the agent's compression today (codec.Encoder at its
//     default level) of the sluice batch body.
//   - agent=section: kafkarec.AppendRecords of the same body, then the
//     same compression of the records section (the key and the header of
//     each record are the extra bytes).
//
// ns/record is CPU time per record on one core; B/record is the
// compressed size: the agent's message (agent=*), the sink's batch today
// (part=batch-compressor). Command (docs/benchmarks.md, issue 27):
//
//	go test -run '^$' -bench BenchmarkNativeHop -count 5 ./internal/store/kafkastore/
//
// The store's path for these messages is now built (ownbatch.go,
// sealAgentBatch): BenchmarkAppendAgentBatches measures it through a
// broker.
func BenchmarkNativeHop(b *testing.B) {
	body, n := nativeHopBody(b)
	agent := []byte("bench-agent-1")
	const message = 123456
	section, _, err := kafkarec.AppendRecords(nil, body, agent, message)
	if err != nil {
		b.Fatal(err)
	}
	enc := codec.NewEncoder(codec.LevelDefault)
	zBody, _ := enc.Encode(nil, body, codec.Zstd, 0)
	zSection, _ := enc.Encode(nil, section, codec.Zstd, 0)
	perRecord := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
		b.ReportMetric(0, "ns/op") // per message; ns/record is the figure
	}
	hdr := kafkarec.BatchHeader{Records: n, Timestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

	b.Run("sink=today", func(b *testing.B) {
		dec := codec.NewDecoder(defaults.SinkMaxMessageLimit)
		var plain, values, records, out []byte
		var recs []kgo.Record
		var hdrs []kgo.RecordHeader
		c := &batchCompressor{}
		var buf bytes.Buffer
		for b.Loop() {
			plain, _ = dec.Decode(plain[:0], zBody, codec.Zstd, 0)
			recs, hdrs, values = splitAndHeaders(b, plain, agent, message, recs[:0], hdrs[:0], values[:0])
			records, _, _ = kafkarec.AppendRecords(records[:0], plain, agent, message)
			buf.Reset()
			z, _ := c.Compress(&buf, records)
			out, _ = kafkarec.AppendBatch(out[:0], hdr, z)
		}
		perRecord(b)
	})
	b.Run("sink=native", func(b *testing.B) {
		dec := codec.NewDecoder(defaults.SinkMaxMessageLimit)
		var plain, out []byte
		var bytes int
		count := func(_ int, v []byte) error { bytes += len(v); return nil }
		for b.Loop() {
			plain, _ = dec.Decode(plain[:0], zSection, codec.Zstd, 0)
			if err := kafkarec.Records(plain, agent, message, n, count); err != nil {
				b.Fatal(err)
			}
			out, _ = kafkarec.AppendBatch(out[:0], hdr, zSection)
		}
		perRecord(b)
	})
	b.Run("agent=body", func(b *testing.B) {
		var z []byte
		for b.Loop() {
			z, _ = enc.Encode(z[:0], body, codec.Zstd, 0)
		}
		perRecord(b)
		b.ReportMetric(float64(len(z))/float64(n), "B/record")
	})
	b.Run("agent=section", func(b *testing.B) {
		var s, z []byte
		for b.Loop() {
			s, _, _ = kafkarec.AppendRecords(s[:0], body, agent, message)
			z, _ = enc.Encode(z[:0], s, codec.Zstd, 0)
		}
		perRecord(b)
		b.ReportMetric(float64(len(z))/float64(n), "B/record")
	})
	// The parts, to see where each path's time goes.
	b.Run("part=decompress-body", func(b *testing.B) {
		dec := codec.NewDecoder(defaults.SinkMaxMessageLimit)
		var plain []byte
		for b.Loop() {
			plain, _ = dec.Decode(plain[:0], zBody, codec.Zstd, 0)
		}
		perRecord(b)
	})
	b.Run("part=decompress-section", func(b *testing.B) {
		dec := codec.NewDecoder(defaults.SinkMaxMessageLimit)
		var plain []byte
		for b.Loop() {
			plain, _ = dec.Decode(plain[:0], zSection, codec.Zstd, 0)
		}
		perRecord(b)
	})
	b.Run("part=records-check", func(b *testing.B) {
		for b.Loop() {
			if err := kafkarec.Records(section, agent, message, n, nil); err != nil {
				b.Fatal(err)
			}
		}
		perRecord(b)
	})
	b.Run("part=append-records", func(b *testing.B) {
		var s []byte
		for b.Loop() {
			s, _, _ = kafkarec.AppendRecords(s[:0], body, agent, message)
		}
		perRecord(b)
	})
	b.Run("part=batch-compressor", func(b *testing.B) {
		c := &batchCompressor{}
		var buf bytes.Buffer
		var z []byte
		for b.Loop() {
			buf.Reset()
			z, _ = c.Compress(&buf, section)
		}
		perRecord(b)
		// What Kafka stores per record today, against agent=section's
		// B/record for the hop.
		b.ReportMetric(float64(len(z))/float64(n), "B/record")
	})
}

// nativeHopBody is a message of bench ingest's records: 200 B metric
// lines (benchkit.FixedSizeSource, which this package cannot import),
// about 256 KiB of them.
func nativeHopBody(b *testing.B) (body []byte, n int) {
	g, err := metricsgen.New(metricsgen.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var bb batch.Builder
	var r []byte
	for bb.Len() < 256<<10-200 {
		r = g.AppendRecord(r[:0])
		for len(r) < 200 {
			r = append(r, ' ')
		}
		if err := bb.Add(r[:200]); err != nil {
			b.Fatal(err)
		}
	}
	return bb.Bytes(), bb.Count()
}

// splitAndHeaders is what split and produce do to a message before the
// producer takes its records: a kgo.Record per record with the agent as
// key and its sluice header, the header values in one buffer.
func splitAndHeaders(b *testing.B, body, agent []byte, message uint64, recs []kgo.Record, hdrs []kgo.RecordHeader, values []byte) ([]kgo.Record, []kgo.RecordHeader, []byte) {
	err := batch.Decode(body, func(rec []byte) error {
		recs = append(recs, kgo.Record{Value: rec})
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	n := len(recs)
	if cap(hdrs) < n {
		hdrs = make([]kgo.RecordHeader, n)
	}
	hdrs = hdrs[:n]
	if need := n * kafkarec.HeaderValueMaxLen(agent); cap(values) < need {
		values = make([]byte, 0, need)
	}
	now := time.Now().Truncate(time.Millisecond)
	for i := range recs {
		v0 := len(values)
		values = kafkarec.AppendHeaderValue(values, RecordHeaders{Agent: agent, Message: message, Index: uint32(i), Count: uint32(n)})
		hdrs[i] = kgo.RecordHeader{Key: HeaderSluice, Value: values[v0:len(values):len(values)]}
		recs[i] = kgo.Record{Topic: "t", Key: agent, Value: recs[i].Value, Headers: hdrs[i : i+1 : i+1], Timestamp: now}
	}
	return recs, hdrs, values
}

// BenchmarkAppendAgentBatches is BenchmarkNativeHop's sink side through
// the real store: one Append of one message of bench ingest's records
// (nativeHopBody, ~1,300 records, 256 KiB) to a single-node broker with
// the default store (its own batches, zstd), the message as the agent
// sends it today (body=zstd: decompressed, split, encoded and compressed
// again by the store) or sealed as a Kafka records section
// (body=kafka_zstd: the agent's bytes behind a batch header). The
// session's check (decompressing the section, kafkarec.Records) is not in
// it: BenchmarkNativeHop's sink=native counts that. cpu-ns/record is this
// process's CPU (the broker is another process).
//
//	SLUICE_KAFKA=require go test -run '^$' -bench BenchmarkAppendAgentBatches -benchmem ./internal/store/kafkastore/
func BenchmarkAppendAgentBatches(b *testing.B) {
	br := kafkatest.Start(b)
	body, n := nativeHopBody(b)
	agent := []byte("bench-agent-1")
	enc := codec.NewEncoder(codec.LevelDefault)
	for _, kind := range []codec.Kind{codec.Zstd, codec.KafkaZstd} {
		b.Run("body="+kind.String(), func(b *testing.B) {
			u, err := ParseURL("kafka://" + br.Addr + "/bench-agent-" + kind.String())
			if err != nil {
				b.Fatal(err)
			}
			k, _, err := Open(benchEnv(b), u)
			if err != nil {
				b.Fatal(err)
			}
			defer k.Close()
			id := uint64(0)
			// The message ids are in the records section: seal each
			// message before the timed loop.
			bodies := make([][]byte, 64)
			for i := range bodies {
				src := body
				if kind == codec.KafkaZstd {
					if src, _, err = kafkarec.AppendRecords(nil, body, agent, uint64(i+1)); err != nil {
						b.Fatal(err)
					}
				}
				bodies[i], _ = enc.Encode(nil, src, kind, 0)
			}
			cpu0 := processCPU(b)
			for b.Loop() {
				id++
				if kind == codec.KafkaZstd && id > uint64(len(bodies)) {
					// Reuse the sealed messages: Kafka does not care
					// that a message id repeats.
					id = 1
				}
				m := &store.Message{Agent: string(agent), AgentB: agent, ID: id, Records: uint32(n), Codec: kind,
					Body: bodies[(id-1)%uint64(len(bodies))]}
				if _, err := k.Append([]*store.Message{m}); err != nil || m.DropErr != nil {
					b.Fatal(err, m.DropErr)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N*n), "cpu-ns/record")
		})
	}
}

// benchEnv is testEnv for a benchmark.
func benchEnv(b *testing.B) Env {
	dir := b.TempDir()
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total"}) }
	h := func() prometheus.Histogram { return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"}) }
	return Env{Log: slog.New(slog.DiscardHandler), DataDir: dir, MaxMessageBytes: defaults.SinkMaxMessage,
		StartTimeout: time.Minute, Dicts: store.NewDicts(dir), OnStatus: func(bool, string) {},
		Metrics: Metrics{Produce: h(), CatchUp: h(), Records: c(), TailRecords: c(), Foreign: c(), TailSkipped: c(),
			Lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})}}
}
