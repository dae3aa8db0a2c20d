package ingest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/seglog"
)

// ingestReq is one Ingest call on its way through the batcher.
type ingestReq struct {
	records [][]byte
	bytes   int64
	mark    spool.Mark // producer "" means an anonymous request; done: records spooled before these
	whole   bool       // the records form one message of their own
	done    chan error // buffered; receives exactly one result
}

// sealedMsg is a finished message on its way to the spool writer. The
// goroutine that sealed it compresses it (or, for all but the last of the
// messages one ingest call seals, a compression worker does), and the
// batcher passes it, in seal order, to the spool writer, which waits for
// ready before appending: compression runs in parallel, the spool keeps
// the order in which messages were sealed (which the producers' progress
// marks rely on).
type sealedMsg struct {
	// b holds the uncompressed batch (b.Bytes()): the batcher's builder
	// itself, handed over at seal rather than copied, and returned to
	// builderPool once compressed.
	b      *builder
	kind   codec.Kind
	dictID uint32
	// id is the message's predicted spool offset (batcher.nextID): the
	// message id a KafkaZstd section carries.
	id       uint64
	rec      *[]byte // the spool record (header + compressed body), pooled
	payload  int     // bytes that go on the wire (the compressed body)
	records  int
	raw      int          // uncompressed body bytes
	reserved int64        // quota bytes reserved by its ingest calls
	waiters  []chan error // ingest calls whose last record is in it
	marks    []spool.Mark // progress of producers' requests with records in it
	ready    chan struct{}
}

// builderPool holds batch builders: a sealed message takes the batcher's
// builder with it (its buffer is the message body) and the batcher takes
// a fresh one, so sealing copies nothing.
var builderPool = sync.Pool{New: func() any { return new(builder) }}

// spoolHeadroom is the room a builder keeps in front of the batch for the
// spool record header, so that a plain message becomes its spool record
// in place (batch.Builder.Framed): the fixed 12 bytes and one producer
// mark with an id of up to 70 bytes. A message whose marks need more is
// copied behind its header instead. Small on purpose: the room the header
// does not use is lost from the front of the buffer each time it is
// recycled (see getBuilder).
const spoolHeadroom = 96

// bufferSlack is what a fresh builder buffer has beyond one message, so
// that it survives about a hundred trips through the spool writer and the
// driver, each shaving off the unused part of spoolHeadroom, before it is
// replaced.
const bufferSlack = 16 << 10

// builder is a batch builder that builds in a spool record buffer (box,
// from spool.GetBuf): a plain message's body is then its record, header in
// front, and goes to the spool and the driver without being copied.
type builder struct {
	batch.Builder
	box *[]byte
}

// getBuilder returns an empty builder with a buffer that holds a message
// of up to maxMessage bytes without growing (growing by appends would
// allocate about twice that whenever the pool hands out a small buffer).
func getBuilder(maxMessage int) *builder {
	b := builderPool.Get().(*builder)
	if b.box == nil || b.Cap() == 0 {
		b.box = spool.GetBuf()
		buf := (*b.box)[:0]
		if need := spoolHeadroom + 8 + maxMessage + BatchOverhead; cap(buf) < need {
			buf = make([]byte, 0, need+bufferSlack)
		}
		b.ResetInto(buf, spoolHeadroom)
		return b
	}
	b.Reset()
	return b
}

// batcher packs records into messages of up to MaxMessageBytes, sealing a
// message when the next record would not fit, when it is full, or when it
// has lingered, and hands it, in order, to the spool writer. It is not a
// goroutine: the ingest call adds its records itself, holding the
// batcher's lock, and compresses the last message it sealed itself once
// it let go of the lock (unlock), so a message crosses no goroutine before
// the spool writer. Earlier messages of a call that seals several go to
// the compression workers, so a large request is still compressed in
// parallel, and so that the caller never waits for room in the pipeline
// while holding a message only it would compress. A message sealed by its
// linger deadline is sealed and compressed in the timer's goroutine.
type batcher struct {
	cfg  *Config
	work chan<- *sealedMsg // to the compression workers
	out  chan<- *sealedMsg // to the spool writer, in seal order
	// sem is the lock (a channel, so that a caller waiting for it while
	// the pipeline is full can give up when its context ends); it guards
	// everything below.
	sem chan struct{}
	b   *builder
	cur sealedMsg
	// own is the last message the lock holder sealed, which it
	// compresses itself after unlock.
	own      *sealedMsg
	compress func(*sealedMsg)
	linger   *time.Timer
	deadline time.Time // when the pending message has lingered enough
	closed   bool

	// kafka, when set, says whether a message begun now is sealed as a
	// Kafka records section (Ingester.SetSealKafka); nil when the agent
	// cannot (see kafkaCapable). agentID is the records' key.
	kafka   *atomic.Bool
	agentID []byte
	// kafkaMsg: the pending message is a Kafka one, decided at its first
	// record; section bounds its records section's length.
	kafkaMsg bool
	section  int
	// nextID is the id the next message sealed gets: the spool log's
	// next offset plus the messages sealed and not yet appended. Seal
	// takes one under the lock; the spool writer gives back those of a
	// failed append (see kafka.go).
	nextID atomic.Uint64
}

// newBatcher returns a batcher sending to the workers on work and to the
// spool writer on out; compress compresses a message in the caller's
// goroutine and closes its ready.
func newBatcher(cfg *Config, work, out chan<- *sealedMsg, compress func(*sealedMsg)) *batcher {
	bt := &batcher{cfg: cfg, work: work, out: out, compress: compress, sem: make(chan struct{}, 1), b: getBuilder(cfg.MaxMessageBytes)}
	bt.linger = time.AfterFunc(time.Hour, bt.lingered)
	bt.linger.Stop()
	return bt
}

// lock takes the batcher's lock, or gives up when ctx ends.
func (bt *batcher) lock(ctx context.Context) error {
	select {
	case bt.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock lets go of the lock, then compresses the last message the
// holder sealed, if any.
func (bt *batcher) unlock() {
	own := bt.own
	bt.own = nil
	<-bt.sem
	if own != nil {
		bt.compress(own)
	}
}

// lingered runs when the linger timer fires: it seals the pending message
// if its deadline has passed (a timer reset for a newer message may fire
// late for an older one).
func (bt *batcher) lingered() {
	bt.sem <- struct{}{}
	defer bt.unlock()
	if bt.closed || bt.b.Count() == 0 {
		return
	}
	if wait := time.Until(bt.deadline); wait > 0 {
		bt.linger.Reset(wait)
		return
	}
	bt.seal()
}

// close seals what is pending, so every accepted ingest call gets an
// answer, and ends the pipeline.
func (bt *batcher) close() {
	bt.sem <- struct{}{}
	defer bt.unlock()
	if bt.closed {
		return
	}
	bt.linger.Stop()
	bt.seal()
	bt.closed = true
	if bt.own != nil {
		bt.work <- bt.own
		bt.own = nil
	}
	close(bt.work)
	close(bt.out)
}

// startLinger starts the linger deadline of a message's first record.
func (bt *batcher) startLinger() {
	bt.deadline = time.Now().Add(bt.cfg.Linger)
	bt.linger.Reset(bt.cfg.Linger)
}

// add packs req's records; the caller holds the lock.
func (bt *batcher) add(req ingestReq) {
	if req.whole {
		bt.seal()
	}
	m := req.mark
	for i, rec := range req.records {
		// The record's share of a Kafka message's section, computed once
		// for the overflow check and the sum after Add when both are for
		// the same index (secAt): it was 3.4 % of BenchmarkSealKafka
		// computed twice. nextID only falls meanwhile (a pull-back), so
		// the first value is still a bound.
		sec, secAt := 0, -1
		if bt.kafkaMsg && bt.b.Count() > 0 {
			secAt = bt.b.Count()
			sec = bt.sectionLen(secAt, rec)
		}
		if !req.whole && bt.b.Count() > 0 && bt.overflows(rec, sec) {
			if m.Producer != "" && i > 0 {
				// The message being sealed holds part of this request.
				bt.cur.marks = append(bt.cur.marks, spool.Mark{Producer: m.Producer, Seq: m.Seq, Done: m.Done + uint32(i)})
			}
			bt.seal()
		}
		if bt.b.Count() == 0 {
			bt.begin()
		}
		if err := bt.b.Add(rec); err != nil {
			// Only ErrTooManyRecords, far beyond any size limit; seal and
			// retry once.
			bt.seal()
			bt.begin()
			_ = bt.b.Add(rec)
		}
		if bt.kafkaMsg {
			if at := bt.b.Count() - 1; at != secAt {
				sec = bt.sectionLen(at, rec)
			}
			bt.section += sec
		}
	}
	bt.cur.reserved += req.bytes
	bt.cur.waiters = append(bt.cur.waiters, req.done)
	if m.Producer != "" {
		m.Done += uint32(len(req.records))
		m.Complete = true
		bt.cur.marks = append(bt.cur.marks, m)
	}
	if req.whole || bt.b.Len() >= bt.cfg.MaxMessageBytes-BatchOverhead ||
		(bt.kafkaMsg && bt.section+bt.sectionLen(bt.b.Count(), nil) > bt.cfg.MaxMessageBytes) {
		bt.seal()
	}
}

// begin starts a message with its first record: its linger deadline, and
// whether it is sealed as a Kafka records section (a message keeps the
// kind it began with, so its size was counted for that kind throughout).
func (bt *batcher) begin() {
	bt.startLinger()
	bt.kafkaMsg, bt.section = bt.kafka != nil && bt.kafka.Load(), 0
}

// overflows reports whether rec would take the pending message beyond
// MaxMessageBytes: its batch, and for a Kafka message its records section
// too, which the sink decompresses under the same limit; sec is rec's
// sectionLen as the message's next record. The section is larger than
// the batch (every record carries the agent id twice, in its key and its
// header, and the header's ids).
func (bt *batcher) overflows(rec []byte, sec int) bool {
	return bt.b.LenWith(len(rec)) > bt.cfg.MaxMessageBytes ||
		(bt.kafkaMsg && bt.section+sec > bt.cfg.MaxMessageBytes)
}

// sectionLen bounds what rec takes in the pending message's records
// section as its record i: the message's id is at most nextID now (it is
// sealed next; the prediction only falls).
func (bt *batcher) sectionLen(i int, rec []byte) int {
	return sectionRecordLen(bt.agentID, bt.nextID.Load(), i, rec, maxSectionCount(bt.cfg.MaxMessageBytes))
}

// seal passes the pending message on for compression (plain: frame) and
// spooling.
func (bt *batcher) seal() {
	if bt.b.Count() == 0 {
		return
	}
	m := bt.cur
	m.b, m.kind, m.dictID, m.records, m.raw = bt.b, bt.cfg.Compression, bt.dictID(), bt.b.Count(), bt.b.Len()
	// Every message takes one id, whatever its kind.
	m.id = bt.nextID.Add(1) - 1
	if bt.kafkaMsg && bt.section <= bt.cfg.MaxMessageBytes {
		// (A message sealed whole, IngestMessage, or of one record near
		// the limit, may exceed it as a section: it stays zstd, which
		// every sink takes.)
		m.kind = codec.KafkaZstd
	}
	bt.kafkaMsg, bt.section = false, 0
	m.ready = make(chan struct{})
	bt.b = getBuilder(bt.cfg.MaxMessageBytes)
	// A plain message needs no compression: its header goes in front of
	// it here (a few bytes). Any other the lock holder compresses after
	// unlock; one it sealed before this goes to a worker, so that the
	// holder never waits on out below with a message only it would
	// compress ahead of the wait.
	if m.kind != codec.Plain || !frame(&m) {
		if bt.own != nil {
			bt.work <- bt.own
		}
		bt.own = &m
	}
	bt.out <- &m
	bt.cur = sealedMsg{}
}

// frame makes a plain message its own spool record: the header is
// written into the room in front of the body (batch.Builder.Framed), the
// body is not copied. It reports false, changing nothing, when the header
// does not fit there (then the compressor copies).
func frame(m *sealedMsg) bool {
	var head [spoolHeadroom]byte
	h := spool.AppendHeader(head[:0], spool.Record{Kind: m.kind, Records: uint32(m.records), Marks: m.marks})
	framed, ok := m.b.Framed(len(h))
	if !ok {
		return false
	}
	copy(framed, h)
	rec := m.b.box
	*rec, m.b.box = framed, nil
	m.rec, m.payload = rec, len(framed)-len(h)
	builderPool.Put(m.b)
	m.b = nil
	close(m.ready)
	return true
}

func (bt *batcher) dictID() uint32 {
	if bt.cfg.Compression == codec.ZstdDict {
		return bt.cfg.Dictionary.ID
	}
	return 0
}

// compressor compresses sealed messages handed to it; the agent runs
// one per CPU.
func (g *Ingester) compressor(work <-chan *sealedMsg) {
	for m := range work {
		g.compress(m)
	}
}

// compress compresses m with one of the agent's encoders (one per CPU:
// at most that many compressions run at once), in the caller's goroutine.
func (g *Ingester) compress(m *sealedMsg) {
	enc := g.encs.get()
	g.compressWith(m, enc)
	g.encs.put(enc)
}

// compressWith turns a sealed message into its spool record with enc
// (and copies a plain one that frame could not make its own record), then
// closes its ready.
func (g *Ingester) compressWith(m *sealedMsg, enc *encoder) {
	body := m.b.Bytes()
	in := body
	if m.kind == codec.KafkaZstd {
		section, _, err := kafkarec.AppendRecords(enc.section[:0], body, g.agentID, m.id)
		if err != nil {
			// Cannot happen: the body is the batcher's and the id was
			// checked (kafkaCapable). Spool it as zstd, which every sink
			// takes.
			g.log.Error("encoding a message as Kafka records failed; spooling it as zstd", "err", err)
			m.kind = codec.Zstd
		} else {
			enc.section, in = section, section
		}
	}
	hdr := spool.Record{Kind: m.kind, DictID: m.dictID, Records: uint32(m.records), Marks: m.marks}
	rec := spool.GetBuf()
	out := spool.AppendHeader((*rec)[:0], hdr)
	header := len(out)
	enc2, err := enc.Encode(out, in, m.kind, m.dictID)
	if err != nil {
		// Cannot happen with a validated config; if it does, spool
		// the message uncompressed rather than fail or lose it.
		g.log.Error("compression failed; spooling the message uncompressed", "err", err)
		hdr.Kind, hdr.DictID = codec.Plain, 0
		m.kind = codec.Plain
		out = spool.AppendHeader((*rec)[:0], hdr)
		enc2 = append(out, body...)
	}
	*rec = enc2
	m.rec, m.payload = rec, len(enc2)-header
	builderPool.Put(m.b)
	m.b = nil
	close(m.ready)
}

// spoolWriter appends sealed messages to the spool in seal order, as many
// per Append as are ready (one fdatasync for all of them), answers the
// ingest calls and tells the driver which ids are now spooled
// (Config.OnSpooled, called in this goroutine).
func (g *Ingester) spoolWriter(in <-chan *sealedMsg) {
	var group []*sealedMsg
	var recs [][]byte
	for m := range in {
		<-m.ready
		group = append(group[:0], m)
	drain:
		for len(group) < 256 {
			select {
			case m, ok := <-in:
				if !ok {
					break drain
				}
				<-m.ready
				group = append(group, m)
			default:
				break drain
			}
		}
		if g.beforeAppend != nil {
			g.beforeAppend(len(group))
		}
		first, err := g.appendGroup(group, &recs)
		if spool.IsNoSpace(err) {
			err = fmt.Errorf("%w: %v", spool.ErrNoSpace, err)
			for _, m := range group {
				g.spoolM.NoSpace.Add(float64(len(m.waiters)))
			}
		}
		now := g.cfg.Now()
		infos := make([]spool.Spooled, 0, len(group))
		for i, m := range group {
			// Record the producers' marks before answering: an answered
			// caller may retry at once (its answer lost on the way), and the
			// retry must find its request complete or it is spooled twice.
			if err == nil {
				// The record goes on to the driver, which sends it from
				// memory (seglog.Append has copied it).
				infos = append(infos, spool.Spooled{ID: first + uint64(i), Size: int64(m.payload), Records: m.records, Raw: m.raw, At: now, Rec: m.rec})
				g.metrics.Spooled(m.raw, m.payload)
				g.spool.Completed(m.marks)
				g.spool.Settle(m.reserved, int64(seglog.FrameSize(len(*m.rec))))
			} else {
				g.spool.Release(m.reserved)
			}
			for _, w := range m.waiters {
				w <- err
			}
			if g.AfterAnswer != nil {
				g.AfterAnswer()
			}
			if err != nil {
				spool.PutBuf(m.rec)
			}
			m.rec = nil
		}
		if err != nil {
			g.log.Error("spool append failed; ingest calls get the error", "err", err, "messages", len(group))
			continue
		}
		g.cfg.OnSpooled(infos)
	}
}

// appendGroup appends the group's records to the spool (recs is scratch)
// and returns the first's offset. A KafkaZstd message carries the id it
// was predicted at seal; one whose id is not the offset it gets now (an
// earlier append failed after it was sealed) is re-encoded first, so the
// spool never holds a section naming another message. A failed append
// takes no offsets: the prediction is pulled back by the group's messages,
// so the messages sealed from now on get their offsets again.
func (g *Ingester) appendGroup(group []*sealedMsg, recs *[][]byte) (first uint64, err error) {
	log := g.spool.Log()
	next := log.NextOffset() // this goroutine is the log's only appender
	fixed := 0
	for i, m := range group {
		if id := next + uint64(i); m.kind == codec.KafkaZstd && m.id != id && !mutationNoReencode {
			if err = g.reencode(m, id); err != nil {
				break
			}
			fixed++
		}
	}
	if fixed > 0 {
		g.log.Warn("re-encoded messages sealed as Kafka records with the ids of a failed spool append", "messages", fixed, "first", next)
	}
	if err == nil {
		*recs = (*recs)[:0]
		for _, m := range group {
			*recs = append(*recs, *m.rec)
		}
		first, err = log.Append(*recs)
		g.spool.AppendDone(err)
	}
	if err != nil {
		g.bt.nextID.Add(-uint64(len(group)))
	}
	return first, err
}
