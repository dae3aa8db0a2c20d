package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/agent/metrics"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/testkit/testfs"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/seglog"
)

// kafkaRig is an Ingester over a spool that does not fsync, with the
// messages the spool writer announced.
type kafkaRig struct {
	g   *Ingester
	sp  *spool.Spool
	log *spoolLog
}

func newKafkaRig(t *testing.T, cfg Config, agentID string, opts ...seglog.Option) *kafkaRig {
	t.Helper()
	sp, err := spool.Open(t.TempDir(), 0, agentID, slog.New(slog.DiscardHandler), append([]seglog.Option{seglog.WithSync(seglog.SyncNone())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	log := &spoolLog{}
	reg := prometheus.NewRegistry()
	cfg.Logger, cfg.Now, cfg.OnSpooled = slog.New(slog.DiscardHandler), func() int64 { return 0 }, log.add
	if cfg.MaxRecordBytes == 0 {
		cfg.MaxRecordBytes = cfg.MaxMessageBytes
	}
	if cfg.Linger == 0 {
		cfg.Linger = time.Millisecond
	}
	g, err := New(cfg, sp, metrics.New(reg), spool.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return &kafkaRig{g: g, sp: sp, log: log}
}

// spooledMsg is one message as the spool holds it, decoded: its records
// (from the records section for a KafkaZstd one, checked by
// kafkarec.Records with its offset as the message id) and the size of the
// decompressed body.
type spooledMsg struct {
	id      uint64
	kind    codec.Kind
	records []string
	raw     int
}

// readSpool decodes every message of the spool's log, in offset order.
func readSpool(t *testing.T, sp *spool.Spool, maxMessage int) []spooledMsg {
	t.Helper()
	var out []spooledMsg
	dec := codec.NewDecoder(maxMessage)
	it := sp.Log().NewIterator(sp.Log().FirstOffset(), 1<<20)
	for it.Next() {
		id := it.Offset()
		rec, err := spool.Decode(it.Value())
		if err != nil {
			t.Fatalf("message %d: %v", id, err)
		}
		body, err := dec.Decode(nil, rec.Body, rec.Kind, rec.DictID)
		if err != nil {
			t.Fatalf("message %d (%v): decompress within %d bytes: %v", id, rec.Kind, maxMessage, err)
		}
		m := spooledMsg{id: id, kind: rec.Kind, raw: len(body)}
		collect := func(_ int, v []byte) error { m.records = append(m.records, string(v)); return nil }
		if rec.Kind == codec.KafkaZstd {
			err = kafkarec.Records(body, []byte(sp.ID()), id, int(rec.Records), collect)
		} else {
			err = batch.Decode(body, func(v []byte) error { return collect(0, v) })
		}
		if err != nil && rec.Kind == codec.KafkaZstd {
			// scripts/mutate.sh's mutation_noreencode greps for this line.
			t.Fatalf("INVARIANT wrong-id: message at offset %d, sealed as Kafka records, is not that message's section: %v", id, err)
		}
		if err != nil {
			t.Fatalf("message %d (%v) at offset %d: %v", id, rec.Kind, id, err)
		}
		if len(m.records) != int(rec.Records) {
			t.Fatalf("message %d holds %d records, its header says %d", id, len(m.records), rec.Records)
		}
		out = append(out, m)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSealKafkaRecords: with SetSealKafka(true), a zstd agent's messages
// are spooled as Kafka records sections (codec.KafkaZstd) that
// kafkarec.Records accepts for the agent's id, the message's spool offset
// and its record count, holding the records in the order ingested; with
// SetSealKafka(false) new messages are zstd again. Several producers at
// once, several compression workers: the ids predicted at seal are the
// offsets the spool writer appends at.
func TestSealKafkaRecords(t *testing.T) {
	const producers, requests, perRequest = 4, 6, 120
	r := newKafkaRig(t, Config{MaxMessageBytes: 8 << 10, Compression: codec.Zstd, CompressWorkers: 3}, "agent-kafka-test")
	ingest := func(phase string) {
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for seq := 1; seq <= requests; seq++ {
					recs := make([][]byte, perRequest)
					for i := range recs {
						recs[i] = []byte(fmt.Sprintf("%s/p%d/s%d/r%d %s", phase, p, seq, i, strings.Repeat("x", i%50)))
					}
					if _, err := r.g.IngestFrom(context.Background(), fmt.Sprintf("%s-%d", phase, p), uint64(seq), recs); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	r.g.SetSealKafka(true)
	ingest("kafka")
	r.g.SetSealKafka(false)
	ingest("zstd")
	r.g.Close()

	msgs := readSpool(t, r.sp, 8<<10)
	next := map[string]int{} // producer → next record number, seq·perRequest + i
	kinds := map[codec.Kind]int{}
	for k, m := range msgs {
		kinds[m.kind]++
		if k > 0 && m.kind == codec.KafkaZstd && msgs[k-1].kind != codec.KafkaZstd {
			t.Fatalf("message %d is %v after a %v one: SetSealKafka(false) did not stick", m.id, m.kind, msgs[k-1].kind)
		}
		if m.kind != codec.KafkaZstd && m.kind != codec.Zstd {
			t.Fatalf("message %d is %v", m.id, m.kind)
		}
		for _, rec := range m.records {
			var phase string
			var p, seq, i int
			if _, err := fmt.Sscanf(strings.ReplaceAll(rec, "/", " "), "%s p%d s%d r%d", &phase, &p, &seq, &i); err != nil {
				t.Fatalf("message %d: record %q: %v", m.id, rec, err)
			}
			if phase == "zstd" && m.kind == codec.KafkaZstd && !slices.ContainsFunc(m.records, func(s string) bool { return strings.HasPrefix(s, "kafka/") }) {
				t.Fatalf("message %d is KafkaZstd with records of the zstd phase only", m.id)
			}
			key := fmt.Sprintf("%s-%d", phase, p)
			if got := (seq-1)*perRequest + i; got != next[key] {
				t.Fatalf("message %d: producer %s record %d, want %d (order or loss)", m.id, key, got, next[key])
			}
			next[key]++
		}
	}
	for _, phase := range []string{"kafka", "zstd"} {
		for p := range producers {
			if n := next[fmt.Sprintf("%s-%d", phase, p)]; n != requests*perRequest {
				t.Errorf("producer %s-%d: %d records spooled, want %d", phase, p, n, requests*perRequest)
			}
		}
	}
	if kinds[codec.KafkaZstd] < 10 || kinds[codec.Zstd] < 10 {
		t.Errorf("kinds spooled %v: want many of each", kinds)
	}
	if n := r.g.reencoded.Load(); n != 0 {
		t.Errorf("%d messages re-encoded with no failed append: the ids predicted at seal were wrong", n)
	}
	// What the spool writer announced is what the log holds.
	if len(r.log.msg) != len(msgs) {
		t.Fatalf("%d messages announced, %d spooled", len(r.log.msg), len(msgs))
	}
	for k, in := range r.log.msg {
		if in.ID != msgs[k].id || in.Raw <= 0 {
			t.Fatalf("announced %+v, spooled id %d", in, msgs[k].id)
		}
	}
}

// TestSealKafkaKeepsOtherKinds: a plain agent's messages stay plain when
// the sink asks for Kafka records: only a plain-zstd agent seals them (a
// dictionary agent keeps its dictionary; Kafka's consumers have none).
func TestSealKafkaKeepsOtherKinds(t *testing.T) {
	r := newKafkaRig(t, Config{MaxMessageBytes: 4 << 10, Compression: codec.Plain}, "")
	r.g.SetSealKafka(true)
	for i := range 20 {
		if err := r.g.IngestMessage(context.Background(), [][]byte{[]byte(fmt.Sprint("plain-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	r.g.Close()
	for _, m := range readSpool(t, r.sp, 4<<10) {
		if m.kind != codec.Plain {
			t.Fatalf("message %d is %v, want plain", m.id, m.kind)
		}
	}
	if kafkaCapable(codec.ZstdDict, []byte("a")) || kafkaCapable(codec.Plain, []byte("a")) || !kafkaCapable(codec.Zstd, []byte("a")) {
		t.Fatal("kafkaCapable: only plain zstd seals Kafka records")
	}
}

// TestKafkaSectionWithinMaxMessage: a records section is larger than its
// batch (every record carries the agent id in its key and its header,
// and the header's ids): with many tiny records and a long agent id, each
// message sealed in Kafka mode still decompresses within MaxMessageBytes,
// which is the limit the sink decompresses with, and messages are not
// sealed much smaller than it. A message sealed whole (IngestMessage)
// whose section would not fit is spooled as zstd instead.
func TestKafkaSectionWithinMaxMessage(t *testing.T) {
	const maxMessage = 4 << 10
	agent := "agent-" + strings.Repeat("long-id-", 25)
	r := newKafkaRig(t, Config{MaxMessageBytes: maxMessage, Compression: codec.Zstd, CompressWorkers: 2}, agent)
	r.g.SetSealKafka(true)
	recs := make([][]byte, 3000)
	for i := range recs {
		recs[i] = []byte{byte('a' + i%26)}
	}
	if _, err := r.g.IngestFrom(context.Background(), "tiny", 1, recs); err != nil {
		t.Fatal(err)
	}
	// A whole message of tiny records: fits as a batch, not as a section.
	whole := make([][]byte, 200)
	for i := range whole {
		whole[i] = []byte("w")
	}
	if err := r.g.IngestMessage(context.Background(), whole); err != nil {
		t.Fatal(err)
	}
	r.g.Close()
	msgs := readSpool(t, r.sp, 1<<20)
	total := 0
	for k, m := range msgs[:len(msgs)-1] {
		total += len(m.records)
		if m.kind != codec.KafkaZstd {
			t.Fatalf("message %d is %v, want KafkaZstd", m.id, m.kind)
		}
		if m.raw > maxMessage {
			t.Errorf("message %d: records section of %d bytes, over MaxMessageBytes %d", m.id, m.raw, maxMessage)
		}
		// One record here takes about 2·len(agent)+20 bytes of section.
		if k < len(msgs)-2 && m.raw < maxMessage-2*(2*len(agent)+40) {
			t.Errorf("message %d: records section of %d bytes sealed well short of %d", m.id, m.raw, maxMessage)
		}
	}
	if total != len(recs) {
		t.Fatalf("%d records spooled, want %d", total, len(recs))
	}
	if last := msgs[len(msgs)-1]; last.kind != codec.Zstd || len(last.records) != len(whole) {
		t.Fatalf("the whole message is %v with %d records, want zstd with %d", last.kind, len(last.records), len(whole))
	}
}

// TestKafkaIDsAfterFailedAppend: a message sealed as Kafka records carries
// the id predicted at seal, and an append that fails (a full disk) takes
// no ids, so the messages sealed while it was in flight carry ids one
// too high per failed message. The spool writer must re-encode them before
// appending: on a byte-budget disk, message A's append fails for lack of
// room while B and C are already sealed behind it; the room comes back and
// B and C are spooled at A's offset and the next, each with the headers
// of the offset it got; D, sealed after, was predicted right (the
// prediction was pulled back) and needed no re-encoding.
func TestKafkaIDsAfterFailedAppend(t *testing.T) {
	disk := testfs.New(1 << 30)
	r := newKafkaRig(t, Config{MaxMessageBytes: 16 << 10, Compression: codec.Zstd, CompressWorkers: 2}, "agent-diskfull", seglog.WithFS(disk))
	r.g.SetSealKafka(true)
	msg := func(name string) [][]byte {
		recs := make([][]byte, 20)
		for i := range recs {
			recs[i] = []byte(fmt.Sprintf("%s-%d %s", name, i, strings.Repeat(name, 100)))
		}
		return recs
	}
	ctx := context.Background()
	if err := r.g.IngestMessage(ctx, msg("first")); err != nil {
		t.Fatal(err)
	}

	// The spool writer stops before A's append until B and C are sealed;
	// the disk is then full for A's append and has room again for the
	// next one.
	var appends atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	r.g.beforeAppend = func(int) {
		switch appends.Add(1) {
		case 1:
			close(entered)
			<-release
			disk.SetLimit(disk.Used())
		case 2:
			disk.SetLimit(1 << 30)
		}
	}
	results := make(chan error, 3)
	ingest := func(name string) { results <- r.g.IngestMessage(ctx, msg(name)) }
	start := r.g.bt.nextID.Load()
	go ingest("A")
	<-entered
	go ingest("B")
	go ingest("C")
	if !testwait.Until(func() bool { return r.g.bt.nextID.Load() == start+3 }) {
		t.Fatalf("B and C not sealed: next id %d, want %d", r.g.bt.nextID.Load(), start+3)
	}
	close(release)
	var failed int
	for range 3 {
		if err := <-results; err != nil {
			if !errors.Is(err, spool.ErrNoSpace) {
				t.Fatalf("ingest: %v, want only A failing with no space", err)
			}
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d ingest calls failed, want A's only", failed)
	}
	if err := r.g.IngestMessage(ctx, msg("D")); err != nil {
		t.Fatal(err)
	}
	r.g.Close()

	msgs := readSpool(t, r.sp, 16<<10) // checks every section's ids against its offset
	var names []string
	for _, m := range msgs {
		if m.kind != codec.KafkaZstd {
			t.Fatalf("message %d is %v", m.id, m.kind)
		}
		names = append(names, strings.SplitN(m.records[0], "-", 2)[0])
	}
	if got := strings.Join(names, ","); got != "first,B,C,D" && got != "first,C,B,D" {
		t.Fatalf("spooled %s, want first, B and C (either order), D", got)
	}
	if n := r.g.reencoded.Load(); n != 2 {
		t.Errorf("%d messages re-encoded, want 2 (B and C; D sealed after the prediction was pulled back)", n)
	}
}

// BenchmarkSealKafka: 16 callers ingest requests of 200-byte metric-like
// records (a 256 KiB message's worth each, packed by the batcher) with
// zstd at the default level into a spool that does not fsync, sealed as
// zstd batches and as Kafka records sections. Shows what a section costs
// over a batch, and (-benchmem) that its encoding allocates nothing per
// message once warm: the section buffer is each encoder's own.
//
//	go test -run XXX -bench SealKafka -benchmem ./internal/agent/ingest/
func BenchmarkSealKafka(b *testing.B) {
	const msgBytes, recBytes, feeders = 256 << 10, 200, 16
	reqs := make([][][]byte, 64)
	rnd := rand.New(rand.NewPCG(1, 2))
	for k := range reqs {
		for i := 0; batch.Size(reqs[k])+recBytes+BatchOverhead < msgBytes; i++ {
			r := fmt.Appendf(nil, "cpu_seconds_total{host=\"host-%d\",core=\"%d\",mode=\"user\"} %d.%03d 17%09d", rnd.IntN(200), rnd.IntN(64), rnd.Uint32(), rnd.IntN(1000), rnd.IntN(1e9))
			reqs[k] = append(reqs[k], append(r, bytes.Repeat([]byte{' '}, max(0, recBytes-len(r)))...))
		}
	}
	for _, kafka := range []bool{false, true} {
		b.Run(fmt.Sprintf("kafka=%v", kafka), func(b *testing.B) {
			g, _ := newPoolIngester(b, codec.Zstd, runtime.GOMAXPROCS(0), msgBytes+BatchOverhead, true)
			g.SetSealKafka(kafka)
			b.SetBytes(int64(batch.Size(reqs[0])))
			b.ReportAllocs()
			b.SetParallelism((feeders + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var k sync.Mutex
			n := 0
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k.Lock()
					m := reqs[n%len(reqs)]
					n++
					k.Unlock()
					if _, err := g.IngestFrom(context.Background(), "", 0, m); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestKafkaSealAllocatesNoMore: compressing a message as a Kafka records
// section allocates no more than compressing its batch: the section is
// built in the encoder's own buffer, reused from message to message.
func TestKafkaSealAllocatesNoMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	g := &Ingester{log: slog.New(slog.DiscardHandler), agentID: []byte("agent-allocs")}
	enc := &encoder{Encoder: codec.NewEncoder(codec.LevelDefault)}
	recs := make([][]byte, 300)
	for i := range recs {
		recs[i] = fmt.Appendf(nil, "cpu_seconds_total{host=\"h-%d\",core=\"%d\"} %d", i%17, i%8, i*7919)
	}
	allocs := func(kind codec.Kind) float64 {
		one := func() {
			b := getBuilder(64 << 10)
			for _, r := range recs {
				if err := b.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			m := sealedMsg{b: b, kind: kind, records: b.Count(), raw: b.Len(), id: 1 << 20, ready: make(chan struct{})}
			g.compressWith(&m, enc)
			if m.kind != kind {
				t.Fatalf("sealed as %v, want %v", m.kind, kind)
			}
			spool.PutBuf(m.rec)
		}
		for range 3 {
			one()
		}
		return testing.AllocsPerRun(50, one)
	}
	zstd, kafka := allocs(codec.Zstd), allocs(codec.KafkaZstd)
	if kafka > zstd {
		t.Fatalf("a Kafka records section costs %.1f allocations per message, a zstd batch %.1f", kafka, zstd)
	}
	t.Logf("allocations per message: zstd %.1f, Kafka section %.1f", zstd, kafka)
}
