package sink

import (
	"time"

	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/seglog"
)

// writeItem is one valid message a Send stream hands to the storage
// writer.
type writeItem struct {
	st     *sendStream
	agent  string
	agentB []byte // agent as bytes, shared by the stream's items
	id     uint64
	codec  storedmsg.Codec
	dictID uint32
	count  uint32
	body   []byte // the payload as received
}

// maxCommitMessages bounds the messages of one group commit, besides
// Config.WriteBatchBytes.
const maxCommitMessages = 4096

// fate is what a commit does with one message.
type fate uint8

const (
	fateAppend  fate = iota // new: appended by this commit
	fateStored              // stored by an earlier commit: ack at once
	fateInBatch             // a copy of a message appended by this commit
	fateDropped             // could not be encoded; already reported
)

type dedupKey struct {
	agent string
	id    uint64
}

// writer is the sink's single storage writer. It alone appends to the
// store and owns the dedup index. Its loop takes every message available
// (one blocking receive, then a non-blocking drain), drops duplicates,
// appends the rest with one seglog.Append — one write and one fdatasync
// for the whole batch — and only then reports the ids, duplicates
// included, to their streams, which ack them.
type writer struct {
	s     *Sink
	dedup *dedupIndex

	batch []writeItem
	// fate[i] is what becomes of batch[i].
	fate    []fate
	buf     []byte
	recs    [][]byte
	inBatch map[dedupKey]struct{}
	streams map[*sendStream]struct{}

	lastCkpt      time.Time
	bytesSinceCkp int64
	dirty         bool
	ckptBuf       []byte
}

func newWriter(s *Sink, d *dedupIndex) *writer {
	return &writer{
		s: s, dedup: d,
		inBatch:  make(map[dedupKey]struct{}),
		streams:  make(map[*sendStream]struct{}),
		lastCkpt: time.Now(),
	}
}

func (w *writer) run() {
	s := w.s
	defer close(s.writerDone)
	tick := time.NewTicker(min(s.cfg.CheckpointInterval, time.Second))
	defer tick.Stop()
	for {
		var it writeItem
		var ok bool
		select {
		case it, ok = <-s.writeCh:
		case <-tick.C:
			w.maybeCheckpoint()
			continue
		}
		if !ok {
			w.checkpoint()
			return
		}
		w.batch = append(w.batch[:0], it)
		size := int64(len(it.body))
		open := true
	drain:
		for len(w.batch) < maxCommitMessages && size < s.cfg.WriteBatchBytes {
			select {
			case it, ok := <-s.writeCh:
				if !ok {
					open = false
					break drain
				}
				w.batch = append(w.batch, it)
				size += int64(len(it.body))
			default:
				break drain
			}
		}
		w.commit()
		clear(w.batch) // drop the bodies
		if !open {
			w.checkpoint()
			return
		}
		w.maybeCheckpoint()
	}
}

// commit stores the current batch and reports it to the streams.
func (w *writer) commit() {
	s := w.s
	w.buf, w.recs, w.fate = w.buf[:0], w.recs[:0], w.fate[:0]
	clear(w.inBatch)
	var queuedBytes int64
	for _, it := range w.batch {
		queuedBytes += int64(len(it.body))
		key := dedupKey{it.agent, it.id}
		if _, ok := w.inBatch[key]; ok {
			w.fate = append(w.fate, fateInBatch)
			continue
		}
		if w.dedup.has(it.agent, it.id) {
			w.fate = append(w.fate, fateStored)
			continue
		}
		m := storedmsg.Message{Codec: it.codec, DictID: it.dictID, MessageID: it.id, RecordCount: it.count,
			AgentID: it.agentB, Body: it.body}
		start := len(w.buf)
		var err error
		if w.buf, err = storedmsg.Append(w.buf, &m); err != nil {
			// The stream validated the fields, so this is a bug. Never
			// store what cannot be read back.
			s.log.Error("sink: cannot encode message; dropped", "agent_id", it.agent, "message_id", it.id, "err", err)
			w.fate = append(w.fate, fateDropped)
			it.st.reportFailure(err)
			continue
		}
		w.inBatch[key] = struct{}{}
		w.fate = append(w.fate, fateAppend)
		// Positions now, slices once buf has stopped growing.
		w.recs = append(w.recs, w.buf[start:len(w.buf):len(w.buf)])
	}
	// buf may have moved while it grew: re-slice the records from it.
	pos := 0
	for i, r := range w.recs {
		w.recs[i] = w.buf[pos : pos+len(r) : pos+len(r)]
		pos += len(r)
	}
	if s.cfg.beforeCommit != nil {
		s.cfg.beforeCommit()
	}
	var err error
	if len(w.recs) > 0 {
		_, err = s.store.Append(w.recs)
	}
	s.m.queuedMsgs.Sub(float64(len(w.batch)))
	s.m.queuedBytes.Sub(float64(queuedBytes))
	if err != nil {
		s.m.storeErrors.Inc()
		s.log.Error("sink: group commit failed; the streams concerned are ended and their agents will resend",
			"messages", len(w.recs), "err", err)
	} else {
		s.m.commitMsgs.Observe(float64(len(w.batch)))
		s.m.storedBytes.Add(float64(len(w.buf)))
		if len(w.recs) > 0 {
			w.dedup.next = s.store.NextOffset()
			w.bytesSinceCkp += int64(len(w.buf))
			w.dirty = true
		}
	}
	for i, it := range w.batch {
		switch f := w.fate[i]; {
		case f == fateDropped:
			continue
		case err != nil && f != fateStored:
			it.st.reportFailure(err)
			continue
		case f == fateAppend:
			w.dedup.set(it.agent).add(it.id)
			s.m.storedMsgs.Inc()
			s.m.storedRecords.Add(float64(it.count))
		default:
			s.m.duplicates.Inc()
		}
		it.st.reportStored(it.id)
		w.streams[it.st] = struct{}{}
	}
	for st := range w.streams {
		st.notify()
	}
	clear(w.streams)
}

// maybeCheckpoint writes a checkpoint if enough time has passed or enough
// was stored since the last one.
func (w *writer) maybeCheckpoint() {
	if w.dirty && (w.bytesSinceCkp >= w.s.cfg.CheckpointBytes || time.Since(w.lastCkpt) >= w.s.cfg.CheckpointInterval) {
		w.checkpoint()
	}
}

// checkpoint persists the dedup index. It runs on the writer's goroutine,
// so the index and its offset are consistent: every record below
// dedup.next was synced before the checkpoint is written.
func (w *writer) checkpoint() {
	if !w.dirty {
		return
	}
	w.ckptBuf = w.dedup.appendCheckpoint(w.ckptBuf[:0])
	if err := seglog.WriteMeta(w.s.cfg.DataDir, checkpointName, w.ckptBuf); err != nil {
		w.s.log.Warn("sink: dedup checkpoint not written; a restart will scan more of the store", "err", err)
		return
	}
	w.s.m.checkpoints.Inc()
	w.lastCkpt, w.bytesSinceCkp, w.dirty = time.Now(), 0, false
}
