package ingest

import (
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/kafkarec"
)

// Messages sealed as Kafka records sections (codec.KafkaZstd, issue 27's
// Kafka-native hop): when the sink asks for them (SetSealKafka) and the
// agent compresses with plain zstd, a message's body is the records
// section kafkarec.AppendRecords builds from its batch, zstd-compressed,
// so that the sink hands Kafka the agent's compressed bytes behind a batch
// header instead of compressing every record a second time.
//
// Every record of such a section carries its message's id, which is the
// message's spool offset, known only once the spool writer appends it,
// after compression. So the batcher predicts it at seal: seglog's offsets
// are consecutive and the spool writer appends in seal order, so the id of
// the message sealed now is the log's next offset plus the messages sealed
// and not yet appended (batcher.nextID). An append that fails takes no
// offsets: the spool writer pulls the prediction back by the messages it
// failed, and re-encodes, before appending, any message sealed meanwhile
// whose id is off (reencode), so the spool never holds a section whose
// headers name another message.

// encoder is one compression worker's encoder and its records-section
// scratch buffer, reused from message to message.
type encoder struct {
	*codec.Encoder
	section []byte
}

// encoderStack holds the free encoders, last in first out: the encoder
// given back last is the next one taken. A queue (a channel, as before)
// handed each message to the next encoder in turn, so any trickle of
// messages soon woke every encoder's zstd state (made on first use, 1.6
// MB after small messages and 3.7 MB after 256 KiB ones at the default
// level: codec's BenchmarkZstdState) and kept them all: an agent with
// GOMAXPROCS 8 held 12 MB for one client's few small requests (a heap
// profile of TestHostileListeners/ingest at GOMAXPROCS=8); 64 cores
// would hold 100 to 230 MB. From a stack, a light load keeps using one encoder, warm in
// the cache, and only as many come into use as compressions ever ran at
// once (TestEncodersFollowConcurrency).
type encoderStack struct {
	mu   sync.Mutex
	free []*encoder
	// tokens holds one token per encoder in free: get waits on it when
	// every encoder is in use.
	tokens chan struct{}
}

func newEncoderStack(n int) *encoderStack {
	return &encoderStack{free: make([]*encoder, 0, n), tokens: make(chan struct{}, n)}
}

// get takes the encoder given back last, waiting while all are in use.
func (s *encoderStack) get() *encoder {
	<-s.tokens
	s.mu.Lock()
	e := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.mu.Unlock()
	return e
}

// put gives e back (or adds it, at the start).
func (s *encoderStack) put(e *encoder) {
	s.mu.Lock()
	s.free = append(s.free, e)
	s.mu.Unlock()
	s.tokens <- struct{}{}
}

// kafkaCapable reports whether an agent with this compression and id can
// seal Kafka records sections: plain zstd only (Kafka's consumers have no
// dictionary, and a plain agent chose not to compress), and an id the
// records' key and headers can carry.
func kafkaCapable(kind codec.Kind, agent []byte) bool {
	return kind == codec.Zstd && len(agent) > 0 && len(agent) <= defaults.MaxAgentIDLen
}

// sectionRecordLen bounds what record i of a message holding value takes
// in its records section (kafkarec.RecordLen): exact but for the message
// id, which is at most id (a prediction only ever falls), and the record
// count, at most maxCount.
func sectionRecordLen(agent []byte, id uint64, i int, value []byte, maxCount uint32) int {
	return kafkarec.RecordLen(int32(i), value, kafkarec.RecordHeaders{Agent: agent, Message: id, Index: uint32(i), Count: maxCount})
}

// maxSectionCount bounds the record count of a message of at most
// maxMessage bytes: every record takes at least one byte of the batch.
func maxSectionCount(maxMessage int) uint32 {
	return uint32(max(1, min(batch.MaxRecords, maxMessage)))
}

// reencoder rebuilds, in the spool writer, a KafkaZstd message whose
// predicted id turned out wrong. Made on first use: the path is rare (an
// append failed while later messages were already sealed).
type reencoder struct {
	dec     *codec.Decoder
	enc     *codec.Encoder
	plain   []byte
	section []byte
}

// reencode rewrites m, sealed as a Kafka records section for message
// m.id, as the same records for message id: it decompresses the body,
// checks it is what the compressor built (kafkarec.Records with m.id),
// rebuilds the section with id in every record's header, compresses it
// into a fresh spool record with m's header, and gives the old record
// back. On error m is unchanged.
func (g *Ingester) reencode(m *sealedMsg, id uint64) error {
	if g.reenc == nil {
		// The decoder's limit is the section's: the batcher keeps it
		// within MaxMessageBytes.
		g.reenc = &reencoder{dec: codec.NewDecoder(g.cfg.MaxMessageBytes), enc: codec.NewEncoder(g.cfg.Level)}
	}
	r := g.reenc
	old := *m.rec
	header := len(old) - m.payload
	var err error
	if r.plain, err = r.dec.Decode(r.plain[:0], old[header:], codec.KafkaZstd, 0); err != nil {
		return fmt.Errorf("re-encode message sealed as %d for id %d: %w", m.id, id, err)
	}
	section := r.section[:0]
	count := uint32(m.records)
	err = kafkarec.Records(r.plain, g.agentID, m.id, m.records, func(i int, v []byte) error {
		section = kafkarec.AppendRecord(section, int32(i), v, kafkarec.RecordHeaders{Agent: g.agentID, Message: id, Index: uint32(i), Count: count})
		return nil
	})
	r.section = section
	if err != nil {
		return fmt.Errorf("re-encode message sealed as %d for id %d: %w", m.id, id, err)
	}
	rec := spool.GetBuf()
	out := append((*rec)[:0], old[:header]...)
	if out, err = r.enc.Encode(out, section, codec.KafkaZstd, 0); err != nil {
		spool.PutBuf(rec)
		return fmt.Errorf("re-encode message sealed as %d for id %d: %w", m.id, id, err)
	}
	*rec = out
	spool.PutBuf(m.rec)
	m.rec, m.payload, m.id = rec, len(out)-header, id
	g.reencoded.Add(1)
	return nil
}
