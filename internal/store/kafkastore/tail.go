package kafkastore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/seglog"
)

// tailer reads the sink's Kafka topic from where the dedup checkpoint left
// off, forever, and records in the dedup index every message whose records
// it has all seen, whichever sink wrote them. Started at the checkpoint, it
// rebuilds the index; running, it learns what other sinks store.
//
// It fetches with requests of its own (kmsg.FetchRequest to each
// partition's leader) rather than a franz-go consumer, so that it can look
// at each record batch's header before decoding it: a batch this sink's
// producer wrote (its producer id, ownPID) is skipped without being
// decompressed or parsed, because the writer adds every message of a
// successful Append to the index itself. Reading those back was most of the
// tailer's cost (bench ingest (b): franz-go's fetch processing and observe,
// ~19 % of the process). A failed Append may have left records in the topic
// of messages the writer did not add: rewind then reads the topic again from
// where the tailer stood when that Append began, skipping nothing from then
// on.
type tailer struct {
	k  *Store
	d  *store.Dedup
	cl *kgo.Client

	ctx    context.Context
	cancel context.CancelFunc

	// Under d.mu: pos[p] is the next offset to read in partition p;
	// changed is closed (and replaced) whenever pos moves. gen counts the
	// rewinds: what a fetch sent before one brought back is not applied.
	// skipOwn is cleared for good by the first rewind.
	pos     map[int32]int64
	changed chan struct{}
	gen     uint64
	skipOwn bool

	// ownPID is the producer id of the records Kafka acknowledged to this
	// sink's producer (-1 until the first), set by Append's promises.
	ownPID atomic.Int64

	// Only run's goroutine uses these: each partition's leader (nil when
	// it must be asked again), whether the last fetch left records to
	// read, the topic's id, and what decodes batches.
	leaders      map[int32]int32
	behind       bool // a partition's answer ended below its high watermark
	topicID      [16]byte
	pools        *tailPools
	decompressor kgo.Decompressor
	lastWarn     time.Time

	// bytes read since the writer last asked (takeTailBytes).
	bytes atomic.Int64
	// records read since startup, for the log.
	records atomic.Int64
}

func newTailer(k *Store, pos map[int32]int64, parts []int32) (*tailer, error) {
	t := &tailer{k: k, d: k.d, pos: pos, changed: make(chan struct{}), skipOwn: true, pools: &tailPools{}}
	t.ownPID.Store(-1)
	t.decompressor = kgo.DefaultDecompressor(t.pools)
	for _, p := range parts {
		if _, ok := t.pos[p]; !ok {
			t.pos[p] = 0 // a partition the checkpoint does not know
		}
	}
	cl, err := kgo.NewClient(clientOpts(k.u, k.env.Log, "tailer")...)
	if err != nil {
		return nil, err
	}
	t.cl = cl
	t.ctx, t.cancel = context.WithCancel(k.ctx)
	return t, nil
}

func (t *tailer) close() {
	t.cancel()
	t.cl.Close()
}

// run reads the topic until close.
func (t *tailer) run() {
	k := t.k
	go func() {
		// The initial catch-up is the rebuild of the index: log it.
		start := time.Now()
		if err := k.catchUp(t.ctx); err == nil {
			t.d.Lock()
			agents, pending := t.d.Agents(), t.d.PendingMessages()
			t.d.Unlock()
			k.env.Log.Info("sink: dedup index caught up with the Kafka topic", "store", k.u.String(),
				"records_read", t.records.Load(), "agents", agents, "partial_messages", pending,
				"took", time.Since(start).Round(time.Millisecond))
		}
	}()
	if hold := k.env.TailHold; hold != nil {
		select {
		case <-hold:
		case <-t.ctx.Done():
			return
		}
	}
	for t.ctx.Err() == nil {
		if pause := t.fetchOnce(); pause > 0 {
			// Do not spin on errors returned at once.
			select {
			case <-t.ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// leaderFetch is one fetch request to a partition leader and its outcome.
type leaderFetch struct {
	asked map[int32]int64 // partition → offset asked for
	resp  *kmsg.FetchResponse
	err   error
}

// fetchOnce sends one fetch to the leader of every partition and applies
// the answers; it returns how long to pause before the next (0: none).
func (t *tailer) fetchOnce() time.Duration {
	if t.leaders == nil {
		if err := t.refreshLeaders(); err != nil {
			t.debug("sink: Kafka tailer cannot list the topic's leaders", -1, err)
			return 250 * time.Millisecond
		}
	}
	t.d.Lock()
	gen, skip := t.gen, t.skipOwn
	byLeader := map[int32]*leaderFetch{}
	unled := false
	for p, o := range t.pos {
		l, ok := t.leaders[p]
		if !ok {
			unled = true // a partition added since: the next refresh finds it
			continue
		}
		if byLeader[l] == nil {
			byLeader[l] = &leaderFetch{asked: map[int32]int64{}}
		}
		byLeader[l].asked[p] = o
	}
	t.d.Unlock()
	// The answers are applied once all leaders have answered: a leader
	// with nothing new holds its answer up to the wait, so with several
	// leaders the wait is short, and none while a partition is behind.
	wait := int32(500)
	switch {
	case t.behind:
		wait = 0
	case len(byLeader) > 1:
		wait = 100
	}
	t.behind = false
	var wg sync.WaitGroup
	for l, f := range byLeader {
		wg.Go(func() { f.resp, f.err = t.fetch(l, f.asked, wait) })
	}
	wg.Wait()
	own := int64(-1)
	if skip {
		own = t.ownPID.Load()
	}
	var pause time.Duration
	for _, f := range byLeader {
		pause = max(pause, t.handle(f, gen, own))
	}
	if unled {
		t.leaders = nil
	}
	return pause
}

// handle applies one leader's answer; it returns how long to pause.
func (t *tailer) handle(f *leaderFetch, gen uint64, own int64) time.Duration {
	if f.err != nil {
		if t.ctx.Err() == nil {
			t.debug("sink: Kafka tailer fetch error", -1, f.err)
		}
		t.leaders = nil
		return 250 * time.Millisecond
	}
	var pause time.Duration
	for _, rt := range f.resp.Topics {
		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			asked, ok := f.asked[rp.Partition]
			if !ok {
				continue
			}
			pause = max(pause, t.handlePartition(rp, asked, gen, own))
		}
	}
	return pause
}

// handlePartition applies one partition's answer: its records, or its
// error (a new leader, an offset retention deleted, ...).
func (t *tailer) handlePartition(rp *kmsg.FetchResponseTopicPartition, asked int64, gen uint64, own int64) time.Duration {
	p := rp.Partition
	err := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case err == nil:
		if err = t.consume(rp, asked, gen, own); err == nil {
			return 0
		}
	case errors.Is(err, kerr.OffsetOutOfRange):
		if err = t.resetToStart(p, asked); err == nil {
			return 0
		}
	case kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicID):
		// Leadership moved, or the topic is being created: ask again.
		t.debug("sink: Kafka tailer fetch error", p, err)
		t.leaders = nil
		return 100 * time.Millisecond
	}
	t.k.env.Log.Warn("sink: Kafka tailer cannot read a partition; retrying", "partition", p, "offset", asked, "err", err)
	t.leaders = nil
	return time.Second
}

// debug logs a fetch error at debug level, at most every 30 seconds: during
// an outage every fetch fails, and the health monitor reports the outage.
func (t *tailer) debug(msg string, p int32, err error) {
	if time.Since(t.lastWarn) > 30*time.Second {
		t.lastWarn = time.Now()
		t.k.env.Log.Debug(msg, "partition", p, "err", err)
	}
}

// refreshLeaders asks the brokers for the leader of every partition.
func (t *tailer) refreshLeaders() error {
	ctx, cancel := context.WithTimeout(t.ctx, ProbeTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(t.k.u.topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return err
	}
	leaders := map[int32]int32{}
	for _, mt := range resp.Topics {
		if mt.Topic == nil || *mt.Topic != t.k.u.topic {
			continue
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return err
		}
		t.topicID = mt.TopicID
		for _, mp := range mt.Partitions {
			if mp.Leader >= 0 {
				leaders[mp.Partition] = mp.Leader
			}
		}
	}
	if len(leaders) == 0 {
		return fmt.Errorf("topic %q has no partition with a leader", t.k.u.topic)
	}
	t.leaders = leaders
	return nil
}

// tailMinBytes is what a fetch of the tailer that may wait asks the broker
// to gather before it answers (within the wait: 500 ms, 100 ms with
// several leaders; a tailer that is behind does not wait). With 1 byte the
// broker answered a fetch for nearly every batch produced: in bench ingest
// (b) the CPU outside the sink's process (the broker's) was 0.30 µs per
// record with it and 0.25 with 1 MiB, and 0.37 against 0.28 with
// agent-records=on, whose batches are smaller (medians of four alternated
// runs; docs/benchmarks.md, issue 27's twelfth pass).
// The index of other sinks' records lags by at most the wait more; this
// sink's own records are skipped by the tailer anyway.
const tailMinBytes = 1 << 20

// fetch sends one fetch request, without a fetch session (each names its
// partitions and offsets), to broker leader; the broker holds it up to
// waitMillis for records to arrive.
func (t *tailer) fetch(leader int32, asked map[int32]int64, waitMillis int32) (*kmsg.FetchResponse, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = waitMillis
	req.MinBytes = 1
	if waitMillis > 0 {
		req.MinBytes = tailMinBytes
	}
	req.MaxBytes = FetchMaxBytes
	req.SessionEpoch = -1 // no session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = t.k.u.topic, t.topicID
	for p, o := range asked {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, o, FetchMaxPartitionBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := t.cl.Broker(int(leader)).RetriableRequest(t.ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.FetchResponse), nil
}

// consume enters the records of one partition's fetched batches in the
// index, skipping the batches of producer own (-1: none), and moves the
// partition's read position past them.
func (t *tailer) consume(rp *kmsg.FetchResponseTopicPartition, asked int64, gen uint64, own int64) error {
	var recs []*kgo.Record
	var skipped int64
	next := asked
	var err error
	for _, s := range splitOwn(rp.RecordBatches, own) {
		if s.data == nil {
			skipped += s.records
			next = max(next, s.next)
			continue
		}
		opts := kgo.ProcessFetchPartitionOpts{Topic: t.k.u.topic, Partition: rp.Partition, Offset: next, Pools: []kgo.Pool{t.pools}}
		fp, after := kgo.ProcessFetchPartition(opts, &kmsg.FetchResponseTopicPartition{Partition: rp.Partition, RecordBatches: s.data}, t.decompressor, nil)
		recs = append(recs, fp.Records...)
		next = max(next, after)
		if fp.Err != nil {
			// A damaged batch: stop before it, and retry it.
			err = fp.Err
			break
		}
	}
	t.apply(rp.Partition, asked, gen, recs, next, skipped)
	if next < rp.HighWatermark {
		t.behind = true
	}
	if err != nil && next == asked {
		return err
	}
	return nil
}

// segment is a stretch of one partition's fetched record batches: batches
// to decode (data), or one batch of this sink's producer to skip (data nil;
// next is the offset after it, records its record count).
type segment struct {
	data    []byte
	next    int64
	records int64
}

// batchHeaderLen is the size of a record batch's header (magic 2), up to
// and including its record count.
const batchHeaderLen = kafkarec.BatchHeaderLen

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// splitOwn splits a partition's fetched record batches (in, as Kafka sent
// them) into segments: the batches producer own wrote (own ≥ 0; control
// batches excepted) on their own, to be skipped, and the stretches between,
// to be decoded. It reads only batch headers and trusts nothing in them: a
// batch that does not fit, and everything after it, goes to the last
// stretch, which the decoder checks (CRC, lengths) as if nothing was split.
func splitOwn(in []byte, own int64) []segment {
	var segs []segment
	run, at := 0, 0
	for len(in)-at >= batchHeaderLen {
		b := in[at:]
		length := int64(int32(binary.BigEndian.Uint32(b[8:])))
		if length < batchHeaderLen-12 || int64(len(b)) < 12+length {
			break
		}
		end := at + 12 + int(length)
		control := binary.BigEndian.Uint16(b[21:])&0x20 != 0
		// A skipped batch is never decoded, so its CRC (CRC-32C of
		// attributes to the end) is checked here: a damaged one is left
		// to the decoder, which reports it, rather than move the read
		// position by an offset delta read from damaged bytes.
		if b[16] == 2 && own >= 0 && int64(binary.BigEndian.Uint64(b[43:])) == own && !control &&
			crc32.Checksum(b[21:12+length], castagnoli) == binary.BigEndian.Uint32(b[17:]) {
			if at > run {
				segs = append(segs, segment{data: in[run:at]})
			}
			base := int64(binary.BigEndian.Uint64(b))
			last := base + int64(int32(binary.BigEndian.Uint32(b[23:])))
			n := max(0, int64(int32(binary.BigEndian.Uint32(b[57:]))))
			segs = append(segs, segment{next: last + 1, records: n})
			run = end
		}
		at = end
	}
	if run < len(in) {
		segs = append(segs, segment{data: in[run:]})
	}
	return segs
}

// apply enters recs in the dedup index and moves partition p's read
// position to next, unless a rewind came after the fetch was sent (gen):
// then the fetch is read again from the rewound position.
func (t *tailer) apply(p int32, asked int64, gen uint64, recs []*kgo.Record, next, skipped int64) {
	k := t.k
	var n, foreign int64
	t.d.Lock()
	if t.gen != gen || t.pos[p] != asked {
		t.d.Unlock()
		for _, r := range recs {
			r.Recycle()
		}
		return
	}
	for _, r := range recs {
		n += int64(len(r.Value) + len(r.Key))
		if h, ok := ParseHeaders(r.Headers); ok {
			t.d.Observe(h.Agent, h.Message, h.Index, h.Count)
		} else {
			foreign++
		}
		// Observe copied what it keeps: give the record and, with
		// its batch's last, the batch's buffers back (tailPools).
		r.Recycle()
	}
	old := t.changed
	moved := next > t.pos[p]
	if moved {
		t.pos[p] = next
		t.changed = make(chan struct{})
	}
	t.d.Unlock()
	if moved {
		close(old)
	}
	if nrec := int64(len(recs)); nrec > 0 {
		t.bytes.Add(n)
		t.records.Add(nrec)
		k.env.Metrics.TailRecords.Add(float64(nrec))
	}
	if foreign > 0 {
		k.env.Metrics.Foreign.Add(float64(foreign))
	}
	if skipped > 0 {
		k.env.Metrics.TailSkipped.Add(float64(skipped))
	}
}

// resetToStart handles a fetch offset outside the partition's log: below
// its start (retention deleted records before the tailer read them: they
// cannot deduplicate resends any more), or beyond its end (the log was
// truncated); either way the partition is read again from its log start.
func (t *tailer) resetToStart(p int32, asked int64) error {
	ctx, cancel := context.WithTimeout(t.ctx, ProbeTimeout)
	starts, err := t.k.adm.ListStartOffsets(ctx, t.k.u.topic)
	cancel()
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return err
	}
	start, ok := starts.Lookup(t.k.u.topic, p)
	if !ok {
		return fmt.Errorf("no start offset listed for partition %d", p)
	}
	t.d.Lock()
	reset := t.pos[p] == asked
	old := t.changed
	if reset {
		t.pos[p] = start.Offset
		t.changed = make(chan struct{})
	}
	t.d.Unlock()
	if !reset {
		return nil
	}
	close(old)
	if start.Offset > asked {
		t.k.env.Log.Warn("sink: records of the Kafka topic were deleted before the dedup tailer read them",
			"partition", p, "offset", asked, "log_start", start.Offset)
	} else {
		t.k.env.Log.Warn("sink: the dedup tailer's position is beyond the end of a Kafka partition; reading it from its start",
			"partition", p, "offset", asked, "log_start", start.Offset)
	}
	return nil
}

// positions copies the read positions: where Append rewinds the tailer to
// if it fails.
func (t *tailer) positions() map[int32]int64 {
	t.d.Lock()
	defer t.d.Unlock()
	return maps.Clone(t.pos)
}

// rewind follows a failed Append, which may have left records in the topic
// (acknowledged, or written though the producer gave up on them) of
// messages the writer did not add to the index: the tailer reads the topic
// again from to, where it stood when that Append began, and no longer skips
// this sink's batches, so that every such record is observed as any other
// sink's would be. It runs on the writer's goroutine before Append returns,
// so no checkpoint holds a position past records the index lacks.
func (t *tailer) rewind(to map[int32]int64) {
	t.d.Lock()
	first := t.skipOwn
	t.skipOwn = false
	t.gen++
	for p, o := range to {
		if t.pos[p] > o {
			t.pos[p] = o
		}
	}
	t.d.Unlock()
	if first {
		t.k.env.Log.Warn("sink: a write to Kafka failed; the dedup tailer reads this sink's own records from now on")
	}
}

// tailPools recycles what the tailer decodes into: each fetched batch's
// decompressed bytes and its records. When the tailer read back every
// record the sink produced, these were without the pools, with the header
// keys franz-go allocates per record, most of the bytes the sink allocated
// (bench ingest, (b)); they still serve whenever it reads other sinks'
// records, or its own after a failed Append.
type tailPools struct{ bufs, recs sync.Pool }

func (p *tailPools) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	if b, ok := p.bufs.Get().([]byte); ok {
		return b
	}
	return make([]byte, 0, 8*len(compressed))
}

func (p *tailPools) PutDecompressBytes(b []byte) {
	if cap(b) <= 8<<20 {
		//lint:ignore SA6002 boxing the slice header costs little beside the buffer it saves
		p.bufs.Put(b[:0])
	}
}

func (p *tailPools) GetRecords(n int) []kgo.Record {
	if rs, ok := p.recs.Get().([]kgo.Record); ok && cap(rs) >= n {
		return rs[:0]
	}
	return make([]kgo.Record, 0, n)
}

func (p *tailPools) PutRecords(rs []kgo.Record) {
	//lint:ignore SA6002 as in PutDecompressBytes
	p.recs.Put(rs[:0])
}

// sawEnds takes the end offsets the monitor listed: partitions added to
// the topic since are read from their start (run finds their leaders), and
// the lag gauge is updated.
func (t *tailer) sawEnds(ends kadm.ListedOffsets) {
	var lag int64
	added := 0
	t.d.Lock()
	for p, o := range ends[t.k.u.topic] {
		pos, ok := t.pos[p]
		if !ok {
			t.pos[p] = 0
			added++
		}
		lag += max(0, o.Offset-pos)
	}
	t.d.Unlock()
	if added > 0 {
		t.k.env.Log.Info("sink: Kafka topic has new partitions; reading them", "partitions", added)
	}
	t.k.env.Metrics.Lag.Set(float64(lag))
}

// waitFor waits until every partition is read up to ends (a partition
// whose end is at its start has nothing to read).
func (t *tailer) waitFor(ctx context.Context, starts, ends map[int32]int64) error {
	t.d.Lock()
	for p := range ends {
		if _, ok := t.pos[p]; !ok {
			t.pos[p] = 0
		}
	}
	t.d.Unlock()
	for {
		t.d.Lock()
		ok := true
		for p, end := range ends {
			if end > starts[p] && t.pos[p] < end {
				ok = false
				break
			}
		}
		ch := t.changed
		t.d.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.ctx.Done():
			return t.ctx.Err()
		}
	}
}

// RecordHeaders are the sluice headers of one Kafka record; the agent
// will encode them too (the Kafka-native hop of issue 27), so kafkarec
// holds them and their encoding.
type RecordHeaders = kafkarec.RecordHeaders

// ParseHeaders finds the sluice headers: the one HeaderSluice header
// this sink writes, or the four headers older sinks wrote. ok is false
// for a record that lacks them or has a malformed one (a record some
// other producer wrote).
func ParseHeaders(hs []kgo.RecordHeader) (h RecordHeaders, ok bool) {
	for _, x := range hs {
		if x.Key == HeaderSluice {
			return kafkarec.ParseHeaderValue(x.Value)
		}
	}
	return parseFourHeaders(hs)
}

// parseFourHeaders reads the headers of records older sinks wrote.
func parseFourHeaders(hs []kgo.RecordHeader) (h RecordHeaders, ok bool) {
	var seen uint8
	for _, x := range hs {
		switch x.Key {
		case HeaderAgent:
			if len(x.Value) == 0 || len(x.Value) > store.MaxAgentID {
				return h, false
			}
			h.Agent, seen = x.Value, seen|1
		case HeaderMessage:
			v, ok := parseDecimal(x.Value, 1<<64-1)
			if !ok {
				return h, false
			}
			h.Message, seen = v, seen|2
		case HeaderIndex:
			v, ok := parseDecimal(x.Value, 1<<32-1)
			if !ok {
				return h, false
			}
			h.Index, seen = uint32(v), seen|4
		case HeaderCount:
			v, ok := parseDecimal(x.Value, 1<<32-1)
			if !ok || v == 0 {
				return h, false
			}
			h.Count, seen = uint32(v), seen|8
		}
	}
	return h, seen == 15 && h.Index < h.Count
}

// parseDecimal parses a canonical decimal number up to limit.
func parseDecimal(b []byte, limit uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (limit-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// The Kafka store's dedup checkpoint, DATA/kafka-dedup.checkpoint, inside
// a seglog metadata file (which adds a length and a CRC), integers
// little-endian:
//
//	"SKC" version(1)
//	topic       u16 length, name
//	topic id    16 bytes (zero if the brokers have none)
//	partitions  u32, per partition: partition u32, next offset u64
//	index       u32 length, the dedup index's checkpoint (store.Dedup)
//	pending     u32, per partial message: agent (u16 length, id),
//	            message id u64, count u32, indexes seen (an id set)
//
// The index holds every message complete in the topic below the
// partitions' offsets (and possibly more: what the writer stored since),
// pending the messages of which only some records are below them.
const (
	CheckpointName         = "kafka-dedup.checkpoint"
	kafkaCheckpointMagic   = "SKC"
	kafkaCheckpointVersion = 1
)

func appendKafkaCheckpoint(dst []byte, topic string, id kadm.TopicID, pos map[int32]int64, d *store.Dedup) []byte {
	dst = append(dst, kafkaCheckpointMagic...)
	dst = append(dst, kafkaCheckpointVersion)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(topic)))
	dst = append(dst, topic...)
	dst = append(dst, id[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(pos)))
	for p, o := range pos {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(p))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(o))
	}
	at := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = d.AppendCheckpoint(dst)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	dst = d.AppendPending(dst)
	return dst
}

// kafkaCheckpoint is a decoded Kafka checkpoint.
type kafkaCheckpoint struct {
	topic string
	id    kadm.TopicID
	pos   map[int32]int64
	d     *store.Dedup
}

func parseKafkaCheckpoint(b []byte) (*kafkaCheckpoint, error) {
	bad := func(format string, args ...any) (*kafkaCheckpoint, error) {
		return nil, fmt.Errorf("%w: %s", store.ErrCheckpoint, fmt.Sprintf(format, args...))
	}
	if len(b) < 6 || string(b[:3]) != kafkaCheckpointMagic || b[3] != kafkaCheckpointVersion {
		return bad("bad header")
	}
	c := &kafkaCheckpoint{pos: make(map[int32]int64)}
	l := int(binary.LittleEndian.Uint16(b[4:]))
	b = b[6:]
	if len(b) < l+16+4 {
		return bad("truncated topic")
	}
	c.topic = string(b[:l])
	copy(c.id[:], b[l:l+16])
	b = b[l+16:]
	np := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(np)*12 > uint64(len(b)) {
		return bad("%d partitions do not fit", np)
	}
	for range np {
		p, o := int32(binary.LittleEndian.Uint32(b)), int64(binary.LittleEndian.Uint64(b[4:]))
		b = b[12:]
		if p < 0 || o < 0 {
			return bad("partition %d at offset %d", p, o)
		}
		if _, dup := c.pos[p]; dup {
			return bad("partition %d listed twice", p)
		}
		c.pos[p] = o
	}
	if len(b) < 4 {
		return bad("truncated index")
	}
	il := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(il) > uint64(len(b)) {
		return bad("truncated index")
	}
	d, err := store.ParseCheckpoint(b[:il])
	if err != nil {
		return nil, err
	}
	c.d = d
	b = b[il:]
	b, err = d.ReadPending(b)
	if err != nil {
		return nil, err
	}
	if len(b) != 0 {
		return bad("%d trailing bytes", len(b))
	}
	return c, nil
}

// loadCheckpoint reads the Kafka dedup checkpoint. A missing, damaged or
// foreign one (another topic, or a topic deleted and created again) only
// costs reading the whole topic.
func (k *Store) loadCheckpoint() (*store.Dedup, map[int32]int64) {
	log := k.env.Log
	fresh := func() (*store.Dedup, map[int32]int64) { return store.NewDedup(), make(map[int32]int64) }
	b, err := seglog.ReadMeta(k.env.DataDir, CheckpointName)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fresh()
	case err != nil:
		log.Warn("sink: dedup checkpoint unreadable; reading the whole topic", "err", err)
		return fresh()
	}
	c, err := parseKafkaCheckpoint(b)
	switch {
	case err != nil:
		log.Warn("sink: dedup checkpoint invalid; reading the whole topic", "err", err)
		return fresh()
	case c.topic != k.u.topic:
		log.Warn("sink: dedup checkpoint is for another topic; reading the whole topic", "checkpoint_topic", c.topic)
		return fresh()
	case c.id != (kadm.TopicID{}) && k.topicID != (kadm.TopicID{}) && c.id != k.topicID:
		log.Warn("sink: dedup checkpoint is for an earlier topic of the same name; reading the whole topic")
		return fresh()
	}
	return c.d, c.pos
}
