package kafkastore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/seglog"
)

// tailer reads the sink's Kafka topic from where the dedup checkpoint left
// off, forever, and records in the dedup index every message whose records
// it has all seen, whichever sink wrote them. Started at the checkpoint, it
// rebuilds the index; running, it learns what other sinks store.
type tailer struct {
	k  *Store
	d  *store.Dedup
	cl *kgo.Client

	ctx    context.Context
	cancel context.CancelFunc

	// Under d.mu: pos[p] is the next offset to read in partition p;
	// changed is closed (and replaced) whenever pos moves.
	pos     map[int32]int64
	changed chan struct{}

	// bytes read since the writer last asked (takeTailBytes).
	bytes atomic.Int64
	// records read since startup, for the log.
	records atomic.Int64
}

func newTailer(k *Store, pos map[int32]int64, parts []int32) (*tailer, error) {
	t := &tailer{k: k, d: k.d, pos: pos, changed: make(chan struct{})}
	offsets := make(map[int32]kgo.Offset, len(parts))
	for _, p := range parts {
		if _, ok := t.pos[p]; !ok {
			t.pos[p] = 0 // a partition the checkpoint does not know
		}
		offsets[p] = kgo.NewOffset().At(t.pos[p])
	}
	opts := append(clientOpts(k.u, k.env.Log, "tailer"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{k.u.topic: offsets}),
		// An offset below the log start (retention deleted it) restarts
		// at the log start.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(FetchMaxPartitionBytes),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.WithPools(&tailPools{}),
	)
	cl, err := kgo.NewClient(opts...)
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
	lastWarn := time.Time{}
	for {
		fs := t.cl.PollRecords(t.ctx, 8192)
		if t.ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
				return
			}
			var loss *kgo.ErrDataLoss
			if errors.As(err, &loss) {
				// Retention deleted records before the tailer read
				// them: they cannot deduplicate resends any more.
				k.env.Log.Warn("sink: records of the Kafka topic were deleted before the dedup tailer read them",
					"partition", p, "err", err)
				return
			}
			if time.Since(lastWarn) > 30*time.Second {
				lastWarn = time.Now()
				k.env.Log.Debug("sink: Kafka tailer fetch error", "partition", p, "err", err)
			}
			if kerr.IsRetriable(err) {
				return
			}
			// franz-go stops fetching a partition after a fatal error:
			// start it again where the index stands, after a pause.
			t.d.Lock()
			at := t.pos[p]
			t.d.Unlock()
			k.env.Log.Warn("sink: Kafka tailer cannot read a partition; retrying", "partition", p, "offset", at, "err", err)
			time.Sleep(time.Second)
			t.cl.RemoveConsumePartitions(map[string][]int32{k.u.topic: {p}})
			t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{k.u.topic: {p: kgo.NewOffset().At(at)}})
		})
		if fs.NumRecords() == 0 && len(fs.Errors()) > 0 {
			// Do not spin on errors returned at once.
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		t.observe(fs)
	}
}

// observe enters the sluice records of fs in the dedup index and moves
// the read positions past every record of fs.
func (t *tailer) observe(fs kgo.Fetches) {
	k := t.k
	var n, nrec, foreign int64
	t.d.Lock()
	fs.EachRecord(func(r *kgo.Record) {
		nrec++
		n += int64(len(r.Value) + len(r.Key))
		if h, ok := ParseHeaders(r.Headers); ok {
			t.d.Observe(h.Agent, h.Message, h.Index, h.Count)
		} else {
			foreign++
		}
		if r.Offset+1 > t.pos[r.Partition] {
			t.pos[r.Partition] = r.Offset + 1
		}
		// Observe copied what it keeps: give the record and, with
		// its batch's last, the batch's buffers back (tailPools).
		r.Recycle()
	})
	old := t.changed
	if nrec > 0 {
		t.changed = make(chan struct{})
	}
	t.d.Unlock()
	if nrec > 0 {
		close(old)
		t.bytes.Add(n)
		t.records.Add(nrec)
		k.env.Metrics.TailRecords.Add(float64(nrec))
		if foreign > 0 {
			k.env.Metrics.Foreign.Add(float64(foreign))
		}
	}
}

// tailPools recycles what the tailer's consumer decodes into: each
// fetched batch's decompressed bytes and its records. The tailer reads back
// every record the sink produces, and without the pools these were, with
// the header keys franz-go allocates per record, most of the bytes the
// sink allocated (bench ingest, (b)).
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
// the topic since are consumed from their start, and the lag gauge is
// updated.
func (t *tailer) sawEnds(ends kadm.ListedOffsets) {
	var lag int64
	add := map[int32]kgo.Offset{}
	t.d.Lock()
	for p, o := range ends[t.k.u.topic] {
		pos, ok := t.pos[p]
		if !ok {
			t.pos[p] = 0
			add[p] = kgo.NewOffset().At(0)
		}
		lag += max(0, o.Offset-pos)
	}
	t.d.Unlock()
	if len(add) > 0 {
		t.k.env.Log.Info("sink: Kafka topic has new partitions; reading them", "partitions", len(add))
		t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{t.k.u.topic: add})
	}
	t.k.env.Metrics.Lag.Set(float64(lag))
}

// waitFor waits until every partition is read up to ends (a partition
// whose end is at its start has nothing to read).
func (t *tailer) waitFor(ctx context.Context, starts, ends map[int32]int64) error {
	add := map[int32]kgo.Offset{}
	t.d.Lock()
	for p := range ends {
		if _, ok := t.pos[p]; !ok {
			t.pos[p] = 0
			add[p] = kgo.NewOffset().At(0)
		}
	}
	t.d.Unlock()
	if len(add) > 0 {
		t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{t.k.u.topic: add})
	}
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

// RecordHeaders are the sluice headers of one Kafka record.
type RecordHeaders struct {
	Agent        []byte
	Message      uint64
	Index, Count uint32
}

// ParseHeaders finds the sluice headers; ok is false for a record that
// lacks one or has a malformed one (a record some other producer wrote).
func ParseHeaders(hs []kgo.RecordHeader) (h RecordHeaders, ok bool) {
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
