package kafkastore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
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

// TestAppendRecyclesRecords: Append recycles each message's Kafka records
// and headers once Kafka acknowledged them, and its decompression buffer.
// Messages of different sizes, compressed and not, appended one after the
// other (each Append hands its records back before the next takes them),
// are read back from the topic each with its own value, key and headers
// (the one HeaderSluice by default; the four of older sinks with
// headers=four, for a topic they still share), and the records of a later
// Append do not carry the timestamp a recycled record had (franz-go only
// stamps a record whose timestamp is zero).
func TestAppendRecyclesRecords(t *testing.T) {
	b := kafkatest.Start(t)
	for _, headers := range []string{"", HeadersOne, HeadersFour} {
		t.Run("headers="+headers, func(t *testing.T) { testAppendRecycles(t, b, headers) })
	}
}

func testAppendRecycles(t *testing.T, b *kafkatest.Broker, headers string) {
	topic, wantHeaders := "recycle", 1
	if headers != "" {
		topic += "-" + headers + "?headers=" + headers
	}
	if headers == HeadersFour {
		wantHeaders = 4
	}
	u, err := ParseURL("kafka://" + b.Addr + "/" + topic)
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := Open(testEnv(t), u)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	enc := codec.NewEncoder(codec.LevelDefault)
	type sent struct {
		msg   *store.Message
		recs  []string
		after time.Time // the records were produced after this
	}
	var all []sent
	for i, n := range []int{12, 3, 150, 1, 40} {
		var bb batch.Builder
		var recs []string
		for j := range n {
			r := fmt.Sprintf("message %d record %d %s", i, j, bytes.Repeat([]byte{'x'}, i*j%97))
			recs = append(recs, r)
			if err := bb.Add([]byte(r)); err != nil {
				t.Fatal(err)
			}
		}
		agent := fmt.Sprintf("edge-%d", i%2)
		m := &store.Message{Agent: agent, AgentB: []byte(agent), ID: uint64(100 + i), Records: uint32(n), Codec: codec.Plain, Body: bytes.Clone(bb.Bytes())}
		if i%2 == 0 {
			m.Codec = codec.Zstd
			if m.Body, err = enc.Encode(nil, m.Body, codec.Zstd, 0); err != nil {
				t.Fatal(err)
			}
		}
		// Kafka's timestamps are milliseconds.
		after := time.Now().Truncate(time.Millisecond)
		if _, err := k.Append([]*store.Message{m}); err != nil || m.DropErr != nil {
			t.Fatalf("message %d: %v, %v", i, err, m.DropErr)
		}
		all = append(all, sent{m, recs, after})
	}

	want := 0
	for _, s := range all {
		want += len(s.recs)
	}
	got := readAll(t, k, want)
	at := 0
	for _, s := range all {
		for j, r := range s.recs {
			rec := got[at]
			at++
			h, ok := ParseHeaders(rec.Headers)
			if !ok || len(rec.Headers) != wantHeaders || wantHeaders == 1 && rec.Headers[0].Key != HeaderSluice || wantHeaders == 4 && rec.Headers[0].Key != HeaderAgent || string(h.Agent) != s.msg.Agent || h.Message != s.msg.ID || int(h.Index) != j || int(h.Count) != len(s.recs) {
				t.Fatalf("message %d record %d: headers %v (parsed %+v, %v)", s.msg.ID, j, rec.Headers, h, ok)
			}
			if string(rec.Value) != r || string(rec.Key) != s.msg.Agent {
				t.Fatalf("message %d record %d: key %q value %q, want %q %q", s.msg.ID, j, rec.Key, rec.Value, s.msg.Agent, r)
			}
			if rec.Timestamp.Before(s.after) {
				t.Fatalf("message %d record %d: timestamp %v, before its Append (%v): a recycled record kept its old one",
					s.msg.ID, j, rec.Timestamp, s.after)
			}
		}
	}
}

// TestAppendCompressions: with each codec the URL's compression parameter
// names, the sink's record batches reach Kafka compressed with it (as a
// plain consumer sees them: franz-go's fetch hook reports each batch's
// codec), and the records read back whole; without the parameter the
// batches are DefaultCompression's.
func TestAppendCompressions(t *testing.T) {
	b := kafkatest.Start(t)
	codecIDs := map[string]uint8{"none": 0, "snappy": 2, "lz4": 3, "zstd": 4}
	for _, name := range append([]string{"default"}, Compressions...) {
		param, want := "?compression="+name, name
		if name == "default" {
			param, want = "", DefaultCompression
		}
		t.Run(name, func(t *testing.T) {
			u, err := ParseURL("kafka://" + b.Addr + "/compression-" + name + param)
			if err != nil {
				t.Fatal(err)
			}
			k, _, err := Open(testEnv(t), u)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			var bb batch.Builder
			var recs []string
			for i := range 500 {
				r := fmt.Sprintf("cpu_seconds_total{host=\"h%d\"} %d", i%7, i)
				recs = append(recs, r)
				if err := bb.Add([]byte(r)); err != nil {
					t.Fatal(err)
				}
			}
			m := &store.Message{Agent: "edge-1", AgentB: []byte("edge-1"), ID: 7, Records: uint32(len(recs)), Codec: codec.Plain, Body: bb.Bytes()}
			if _, err := k.Append([]*store.Message{m}); err != nil || m.DropErr != nil {
				t.Fatalf("append: %v, %v", err, m.DropErr)
			}
			seen := &batchCodecs{}
			got := readAll(t, k, len(recs), kgo.WithHooks(seen))
			for i, r := range got {
				if string(r.Value) != recs[i] {
					t.Fatalf("record %d: %q, want %q", i, r.Value, recs[i])
				}
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if len(seen.codecs) == 0 {
				t.Fatal("no batch read")
			}
			// franz-go's producer (the lz4 and snappy paths) sends a batch
			// uncompressed when compressing does not shrink it, as a small
			// one flushed alone may (a CI run saw a snappy batch of codec
			// 0): another codec is wrong, none is not.
			compressed := false
			for _, c := range seen.codecs {
				if c != codecIDs[want] && c != 0 {
					t.Fatalf("a batch of codec %d, want %d (%s)", c, codecIDs[want], want)
				}
				compressed = compressed || c == codecIDs[want]
			}
			if !compressed {
				t.Fatalf("no batch of codec %d (%s) among %v", codecIDs[want], want, seen.codecs)
			}
		})
	}
}

// batchCodecs records the codec of every batch a consumer reads.
type batchCodecs struct {
	mu     sync.Mutex
	codecs []uint8
}

func (h *batchCodecs) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.mu.Lock()
	h.codecs = append(h.codecs, m.CompressionType)
	h.mu.Unlock()
}

// testEnv is the Env of a store in a test: defaults, no metrics
// registered, nothing logged.
func testEnv(t *testing.T) Env {
	h := func() prometheus.Histogram { return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"}) }
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total"}) }
	dir := t.TempDir()
	return Env{Log: slog.New(slog.DiscardHandler), DataDir: dir, MaxMessageBytes: defaults.SinkMaxMessage,
		StartTimeout: time.Minute, Dicts: store.NewDicts(dir),
		Metrics:  Metrics{Produce: h(), CatchUp: h(), Records: c(), TailRecords: c(), Foreign: c(), TailSkipped: c(), Lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})},
		OnStatus: func(bool, string) {}}
}

// readAll reads the store's topic from its start until it has n records.
func readAll(t *testing.T, k *Store, n int, opts ...kgo.Opt) []*kgo.Record {
	cl, err := kgo.NewClient(append(k.ClientOpts("test-reader"), append(opts, kgo.ConsumeTopics(k.Topic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records within a minute", len(got), n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		got = append(got, fs.Records()...)
	}
	if len(got) != n {
		t.Fatalf("%d records in the topic, want %d", len(got), n)
	}
	for i, r := range got {
		if r.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Offset)
		}
	}
	return got
}

// BenchmarkBatchCompressor compares the sink's batch compressors (its
// zstd one, franz-go's lz4 and snappy), and franz-go's default zstd one,
// compressing and decompressing what the sink produces from bench ingest's
// records: a Kafka batch's records section of 200 B metric lines with the
// sluice header, about 4 MiB (the topic's max.message.bytes). It
// reports the compression ratio beside the speed.
func BenchmarkBatchCompressor(b *testing.B) {
	g, err := metricsgen.New(metricsgen.Config{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var payload, r []byte
	for i := 0; len(payload) < 4<<20; i++ {
		// bench ingest's records (benchkit.FixedSizeSource, which this
		// package cannot import: it reaches the sink).
		r = g.AppendRecord(r[:0])
		for len(r) < 200 {
			r = append(r, ' ')
		}
		r = r[:200]
		// A record as Kafka frames it: length, attributes, deltas,
		// key, value and the headers.
		hv := kafkarec.AppendHeaderValue(nil, RecordHeaders{Agent: []byte("edge-1"), Message: 123456, Index: uint32(i % 1300), Count: 1300})
		payload = binary.AppendVarint(payload, int64(len(r)+len(hv)+20))
		payload = append(payload, 0, 2, byte(i))
		payload = binary.AppendVarint(payload, 6)
		payload = append(payload, "edge-1"...)
		payload = binary.AppendVarint(payload, int64(len(r)))
		payload = append(payload, r...)
		payload = binary.AppendVarint(payload, 1)
		payload = binary.AppendVarint(payload, int64(len(HeaderSluice)))
		payload = append(payload, HeaderSluice...)
		payload = binary.AppendVarint(payload, int64(len(hv)))
		payload = append(payload, hv...)
	}
	franz, err := kgo.DefaultCompressor(kgo.ZstdCompression())
	if err != nil {
		b.Fatal(err)
	}
	compressors := []struct {
		name string
		kgo.Compressor
	}{{"franz-go-default-zstd", franz}, {"sink-zstd", &batchCompressor{}}}
	for _, alg := range []string{"lz4", "snappy"} {
		// The sink's other codecs are franz-go's own compressors.
		cc := map[string]kgo.CompressionCodec{"lz4": kgo.Lz4Compression(), "snappy": kgo.SnappyCompression()}[alg]
		c, err := kgo.DefaultCompressor(cc)
		if err != nil {
			b.Fatal(err)
		}
		compressors = append(compressors, struct {
			name string
			kgo.Compressor
		}{alg, c})
	}
	// The tailer and every consumer pay the decompression: measured
	// beside each compressor, on its output.
	dec := kgo.DefaultDecompressor()
	for _, c := range compressors {
		var buf bytes.Buffer
		out, kind := c.Compress(&buf, payload)
		out = bytes.Clone(out)
		b.Run("compress/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				c.Compress(&buf, payload)
			}
			b.ReportMetric(float64(len(payload))/float64(len(out)), "ratio")
		})
		b.Run("decompress/"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := dec.Decompress(out, kind); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend: one Append of a message of 1,000 records of 200 B (plain,
// bench ingest's record size) to a single-node broker, acks=all with the
// default codec: what the sink's Kafka path costs per record in the
// process (producing, compressing, and the tailer, which skips these
// batches), and its allocations.
func BenchmarkAppend(b *testing.B) {
	br := kafkatest.Start(b)
	u, err := ParseURL("kafka://" + br.Addr + "/bench-append")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	c := func() prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: "c_total"}) }
	h := func() prometheus.Histogram { return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h"}) }
	env := Env{Log: slog.New(slog.DiscardHandler), DataDir: dir, MaxMessageBytes: defaults.SinkMaxMessage,
		StartTimeout: time.Minute, Dicts: store.NewDicts(dir), OnStatus: func(bool, string) {},
		Metrics: Metrics{Produce: h(), CatchUp: h(), Records: c(), TailRecords: c(), Foreign: c(), TailSkipped: c(),
			Lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})}}
	k, _, err := Open(env, u)
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	const n = 1000
	var bb batch.Builder
	rec := bytes.Repeat([]byte{'m'}, 200)
	for range n {
		if err := bb.Add(rec); err != nil {
			b.Fatal(err)
		}
	}
	body := bytes.Clone(bb.Bytes())
	id := uint64(0)
	cpu0 := processCPU(b)
	for b.Loop() {
		id++
		m := &store.Message{Agent: "edge-1", AgentB: []byte("edge-1"), ID: id, Records: n, Codec: codec.Plain, Body: body}
		if _, err := k.Append([]*store.Message{m}); err != nil || m.DropErr != nil {
			b.Fatal(err, m.DropErr)
		}
	}
	// The process's CPU (the broker is another process), steadier than
	// wall time on a shared machine.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N*n), "cpu-ns/record")
}

// processCPU is the CPU time this process has used, in nanoseconds.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
