package kafkastore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store"
)

// The sink's own record batches: with the default settings (zstd, the one
// HeaderSluice header) the store encodes each message's records as Kafka
// record batches itself and writes them with seqWriter, instead of handing
// franz-go's producer one record at a time. The records are the same
// (key: the agent id; one header; the message's timestamp), so any Kafka
// consumer reads them as before. It is the first half of the Kafka-native
// hop (docs/benchmarks.md, issue 27's seventh pass). The second half: a
// message an agent sealed as a Kafka records section (codec.KafkaZstd,
// checked by the sink's session) is not decoded here at all; its
// compressed bytes become a batch of their own behind a header
// (sealAgentBatch), in its partition's order among the other messages.

// ownBatchWriter is what Append needs for the sink's own batches. Only
// the writer's goroutine uses it, and, during an Append, the compressor
// goroutine that Append starts: the writer decodes messages and encodes
// their records into sections while the compressor compresses the
// sections before and sends them, so the two run on both cores as
// franz-go's producer ran beside the writer (with the writer doing both,
// bench ingest (b) lost a fifth of its rate at less CPU per record).
type ownBatchWriter struct {
	w    *seqWriter
	part kgo.TopicPartitioner
	// section is the uncompressed records of the batch being built, n of
	// them; free holds the other sections, back from the compressor.
	section []byte
	n       int
	free    chan []byte
	byPart  []partMsg

	// The compressor's, during an Append: enc, and bufs, the batches'
	// buffers, reused from Append to Append (a batch's bytes must live
	// until the round's Wait returns), used of them by this Append.
	enc   *zstd.Encoder
	bufs  [][]byte
	used  int
	round *seqRound
	jobs  chan sealJob
}

// sealJob is a section for the compressor to make a batch of, or, with
// agentZstd set, a kafka_zstd message's body: a records section the agent
// compressed, which the compressor puts behind a batch header as it is.
type sealJob struct {
	part      int32
	section   []byte
	agentZstd []byte
	n         int
	now       int64
}

// ownSections is how many sections the writer and the compressor share:
// one being filled, one being compressed, one waiting between them.
const ownSections = 3

func newOwnBatchWriter(k *Store) (*ownBatchWriter, error) {
	// batchCompressor's settings: the fastest level, a 64 KiB window, no
	// frame checksum (Kafka's CRC-32C covers the batch).
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	if err != nil {
		return nil, err
	}
	o := &ownBatchWriter{
		w:    newSeqWriter(k.cl, k.u.topic, "sluice-sink-writer", 10*time.Second),
		part: kgo.StickyKeyPartitioner(nil).ForTopic(k.u.topic),
		enc:  enc,
		free: make(chan []byte, ownSections),
	}
	for range ownSections - 1 {
		o.free <- nil
	}
	return o, nil
}

// compress makes and sends a batch of each section the writer seals, in
// order, until jobs is closed.
func (o *ownBatchWriter) compress(done chan<- struct{}) {
	defer close(done)
	for j := range o.jobs {
		if o.used == len(o.bufs) {
			o.bufs = append(o.bufs, nil)
		}
		if j.agentZstd != nil {
			o.bufs[o.used] = sealAgentBatch(o.bufs[o.used][:0], j)
		} else {
			o.bufs[o.used] = o.seal(o.bufs[o.used][:0], j)
		}
		o.round.Add(outBatch{Partition: j.part, Data: o.bufs[o.used]})
		o.used++
		if j.agentZstd == nil {
			o.free <- j.section // an agent's batch took no section
		}
	}
}

// appendOwn writes msgs as the sink's own batches (see above) and waits
// for Kafka to store them all. The records of consecutive messages bound
// for one partition share batches (ownBatchTarget), so that small
// messages make full batches as franz-go's linger would.
func (k *Store) appendOwn(msgs []*store.Message) (bytes int64, nrecs int, err error) {
	o := k.own
	pid, nparts, err := o.w.prepare(k.ctx)
	if err != nil {
		return 0, 0, err
	}
	// The tailer skips this sink's batches by producer id: it must know
	// the id before the first batch can reach the topic.
	k.tail.ownPID.Store(pid)
	// The messages by partition, each partition's in their order.
	o.byPart = o.byPart[:0]
	for i, it := range msgs {
		part := int32(o.part.Partition(&kgo.Record{Key: it.AgentB}, nparts))
		o.byPart = append(o.byPart, partMsg{part, i})
	}
	slices.SortStableFunc(o.byPart, func(a, b partMsg) int { return cmp.Compare(a.part, b.part) })
	o.used = 0
	if o.round, err = o.w.Begin(k.ctx); err != nil {
		return 0, 0, err
	}
	o.jobs = make(chan sealJob, 1)
	compressed := make(chan struct{})
	go o.compress(compressed)
	now := time.Now().UnixMilli()
	for g := 0; g < len(o.byPart); {
		part := o.byPart[g].part
		o.section, o.n = o.section[:0], 0
		for ; g < len(o.byPart) && o.byPart[g].part == part; g++ {
			it := msgs[o.byPart[g].msg]
			if k.agentBatchFits(it) {
				// The agent's records, compressed by the agent, are a
				// batch of their own: what the section holds so far
				// goes first, so the partition keeps message order.
				if o.n > 0 {
					o.sealBatch(part, now)
				}
				o.jobs <- sealJob{part: part, agentZstd: it.Body, n: int(it.Records), now: now}
				// Its values' bytes are not known without
				// decompressing: count the body as received, as the
				// embedded store does.
				bytes += int64(len(it.Body))
				nrecs += int(it.Records)
				continue
			}
			m := msgRecordsPool.Get().(*msgRecords)
			if err := k.split(m, it); err != nil || len(m.recs) == 0 {
				m.release()
				it.DropErr = err
				continue
			}
			for from := 0; from < len(m.recs); {
				from = o.addRecords(m, it, from, min(k.recordLimit, ownBatchTarget))
				if from < len(m.recs) {
					o.sealBatch(part, now) // full
				}
			}
			for _, r := range m.recs {
				bytes += int64(len(r.Value))
			}
			nrecs += len(m.recs)
			m.release()
		}
		if o.n > 0 {
			o.sealBatch(part, now)
		}
	}
	// Every batch was sent as soon as it was compressed (room in flight
	// allowing): encoding and compressing the later ones overlapped Kafka
	// storing the first.
	close(o.jobs)
	<-compressed
	err = o.round.Wait()
	o.round = nil
	if err != nil {
		return 0, 0, err
	}
	clear(o.bufs[o.used:]) // a burst's extra buffers are not kept
	o.bufs = o.bufs[:o.used]
	return bytes, nrecs, nil
}

// ownBatchTarget bounds a batch's records (uncompressed) below the
// topic's limit: about what franz-go's batches hold by default (1 MB), so
// that a large Append is several requests in flight, not one, and a
// batch the broker refuses takes few messages with it. A record larger
// than this is a batch of its own.
const ownBatchTarget = 1 << 20

// partMsg is a message's index in an Append and its partition.
type partMsg struct {
	part int32
	msg  int
}

// addRecords encodes m's records from from on into o.section (a record
// batch's records, uncompressed, o.n of them so far), as many as fit in
// limit bytes (at least one in an empty section), and returns the index
// after the last.
func (o *ownBatchWriter) addRecords(m *msgRecords, it *store.Message, from, limit int) int {
	n := len(m.recs)
	to := from
	for ; to < n; to++ {
		h := kafkarec.RecordHeaders{Agent: it.AgentB, Message: it.ID, Index: uint32(to), Count: uint32(n)}
		v := m.recs[to].Value
		if o.n > 0 && len(o.section)+kafkarec.RecordLen(int32(o.n), v, h) > limit {
			break
		}
		o.section = kafkarec.AppendRecord(o.section, int32(o.n), v, h)
		o.n++
	}
	return to
}

// sealBatch hands the section to the compressor as a batch of partition
// part and starts an empty one.
func (o *ownBatchWriter) sealBatch(part int32, now int64) {
	o.jobs <- sealJob{part: part, section: o.section, n: o.n, now: now}
	o.section, o.n = (<-o.free)[:0], 0
}

// seal appends to dst the record batch of j: kafkarec's header (the
// producer id, epoch and sequence are seqWriter's to stamp), then the
// section compressed straight after it.
func (o *ownBatchWriter) seal(dst []byte, j sealJob) []byte {
	start := len(dst)
	// j.n ≥ 1: a section is sealed only with records in it.
	dst, _ = kafkarec.AppendBatchHeader(dst, kafkarec.BatchHeader{Records: j.n, Timestamp: j.now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	dst = o.enc.EncodeAll(j.section, dst)
	kafkarec.SealBatch(dst[start:])
	return dst
}

// agentBatchFits reports whether it is a kafka_zstd message (codec.KafkaZstd)
// that the writer sends as it came, as a batch of its own: the session
// checked its records section (key, sluice header and offsetDelta of every
// record), so it only needs a header, and the batch must fit the topic's
// max.message.bytes. A larger one is decompressed and split into batches
// like any other message (split), which the broker takes; so is a smaller
// one than minAgentBatchBytes, whose records join the partition's open
// section.
func (k *Store) agentBatchFits(it *store.Message) bool {
	return it.Codec == codec.KafkaZstd && it.Records > 0 && it.DictID == 0 &&
		len(it.Body) >= minAgentBatchBytes &&
		kafkarec.BatchHeaderLen+len(it.Body) <= k.recordLimit+kafkaRecordOverhead
}

// minAgentBatchBytes is the least compressed size of a kafka_zstd message
// the writer makes a batch of its own. An agent that seals little at a time
// (a light load: it seals what its linger gathered) would otherwise put a
// batch of a few records in the topic per message: the broker's work per
// batch for a few records, and zstd's frame and tables for each, where the
// sink's own batches pack consecutive messages into up to ownBatchTarget.
// An agent's full message (256 KiB of the bench's records) is about 16 KiB
// compressed, 4× this.
const minAgentBatchBytes = 4 << 10

// sealAgentBatch appends to dst the record batch of j, a kafka_zstd
// message: kafkarec's header (zstd, j.n records, every record at j.now;
// the producer id, epoch and sequence are seqWriter's to stamp), then the
// agent's compressed bytes, untouched. Nothing is decompressed or
// compressed: this is the Kafka-native hop's saving.
func sealAgentBatch(dst []byte, j sealJob) []byte {
	start := len(dst)
	// j.n ≥ 1 (agentBatchFits).
	dst, _ = kafkarec.AppendBatchHeader(dst, kafkarec.BatchHeader{Records: j.n, Timestamp: j.now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	dst = append(dst, j.agentZstd...)
	kafkarec.SealBatch(dst[start:])
	return dst
}

// prepare returns the producer id the next Write stamps and the topic's
// partition count, asking Kafka for what the writer does not know yet
// (and waiting while Kafka is away, until ctx ends).
func (w *seqWriter) prepare(ctx context.Context) (pid int64, partitions int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ensurePID(ctx); err != nil {
		return 0, 0, err
	}
	if n := w.partitionsSeen.Load(); n > 0 && int(n) != len(w.leaders) {
		w.leaders = nil // partitions added (or the probe saw them first)
	}
	for tries := 1; w.leaders == nil; tries++ {
		err := w.refreshLeaders(ctx)
		if err == nil {
			break
		}
		if err := sleepCtx(ctx, retryBackoff(tries)); err != nil {
			return 0, 0, fmt.Errorf("kafka: partitions of %q: %w", w.topic, err)
		}
	}
	return w.pid, len(w.leaders), nil
}
