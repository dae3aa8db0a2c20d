package sink

import (
	"time"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/seglog"
)

// maxCommitMessages bounds the messages of one group commit, besides
// Config.WriteBatchBytes.
const maxCommitMessages = 4096

// fate is what a commit does with one message.
type fate uint8

const (
	fateAppend  fate = iota // new: appended by this commit
	fateStored              // stored by an earlier commit: ack at once
	fateInBatch             // a copy of a message appended by this commit
)

type dedupKey struct {
	agent string
	id    uint64
}

// writer is the sink's single storage writer. It alone writes the store
// and decides what is a duplicate. Its loop takes every message available
// (one blocking receive, then a non-blocking drain), drops duplicates,
// stores the rest with one store.append — for the embedded store one write
// and one fdatasync, for Kafka one produce of all their records and the
// wait for every ack — and only then reports the ids, duplicates included,
// to their streams, which ack them.
type writer struct {
	s     *Sink
	dedup *store.Dedup

	batch []store.Message
	// fate[i] is what becomes of batch[i].
	fate    []fate
	appends []*store.Message
	inBatch map[dedupKey]struct{}
	acks    map[*store.Acks]struct{}

	lastCkpt      time.Time
	bytesSinceCkp int64
	dirty         bool
	ckptBuf       []byte
}

func newWriter(s *Sink, d *store.Dedup) *writer {
	return &writer{
		s: s, dedup: d,
		inBatch:  make(map[dedupKey]struct{}),
		acks:     make(map[*store.Acks]struct{}),
		lastCkpt: time.Now(),
	}
}

func (w *writer) run() {
	s := w.s
	defer close(s.writerDone)
	tick := time.NewTicker(min(s.cfg.CheckpointInterval, time.Second))
	defer tick.Stop()
	for {
		var it store.Message
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
		size := int64(len(it.Body))
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
				size += int64(len(it.Body))
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
	w.fate, w.appends = w.fate[:0], w.appends[:0]
	clear(w.inBatch)
	var queuedBytes int64
	w.dedup.Lock()
	for i := range w.batch {
		it := &w.batch[i]
		queuedBytes += int64(len(it.Body))
		key := dedupKey{it.Agent, it.ID}
		if _, ok := w.inBatch[key]; ok && !mutationNoDedup {
			w.fate = append(w.fate, fateInBatch)
			continue
		}
		if w.dedup.Has(it.Agent, it.ID) && !mutationNoDedup {
			w.fate = append(w.fate, fateStored)
			continue
		}
		w.inBatch[key] = struct{}{}
		w.fate = append(w.fate, fateAppend)
		w.appends = append(w.appends, it)
	}
	w.dedup.Unlock()
	if s.cfg.beforeCommit != nil {
		s.cfg.beforeCommit()
	}
	var (
		n   int64
		err error
	)
	if len(w.appends) > 0 {
		n, err = s.store.Append(w.appends)
	}
	s.m.queuedMsgs.Sub(float64(len(w.batch)))
	s.m.queuedBytes.Sub(float64(queuedBytes))
	if len(w.appends) > 0 {
		s.setWriteErr(err)
	}
	if err != nil {
		s.m.storeErrors.Inc()
		s.noteError("group commit of %d messages failed: %v", len(w.appends), err)
		s.log.Error("sink: group commit failed; the streams concerned are ended and their agents will resend",
			"messages", len(w.appends), "err", err)
	} else {
		s.m.commitMsgs.Observe(float64(len(w.batch)))
		s.m.storedBytes.Add(float64(n))
		if n > 0 {
			w.bytesSinceCkp += n
			w.dirty = true
		}
	}
	// A copy of a message the store dropped shares its fate.
	for _, it := range w.appends {
		if it.DropErr != nil {
			for i := range w.batch {
				if c := &w.batch[i]; w.fate[i] == fateInBatch && c.Agent == it.Agent && c.ID == it.ID {
					c.DropErr = it.DropErr
				}
			}
		}
	}
	w.dedup.Lock()
	for i := range w.batch {
		it := &w.batch[i]
		f := w.fate[i]
		switch {
		case it.DropErr != nil:
			continue
		case err != nil && f != fateStored:
			continue
		case f == fateAppend:
			w.dedup.Add(it.Agent, it.ID)
		}
	}
	w.dedup.Unlock()
	for i := range w.batch {
		it := &w.batch[i]
		dup := false
		switch f := w.fate[i]; {
		case it.DropErr != nil:
			s.log.Error("sink: cannot store message; dropped", "agent_id", it.Agent, "message_id", it.ID, "err", it.DropErr)
			it.Acks.Fail(it.DropErr)
			continue
		case err != nil && f != fateStored:
			it.Acks.Fail(err)
			continue
		case f == fateAppend:
			s.m.storedMsgs.Inc()
			s.m.storedRecords.Add(float64(it.Records))
		default:
			s.m.duplicates.Inc()
			dup = true
		}
		it.Acks.Stored(it.ID, int(it.Records), dup)
		w.acks[it.Acks] = struct{}{}
	}
	for a := range w.acks {
		a.Signal()
	}
	clear(w.acks)
}

// maybeCheckpoint writes a checkpoint if enough time has passed or enough
// was stored (or, with Kafka, read by the tailer) since the last one.
func (w *writer) maybeCheckpoint() {
	if n := w.s.store.TakeTailBytes(); n > 0 {
		w.bytesSinceCkp += n
		w.dirty = true
	}
	if w.dirty && (w.bytesSinceCkp >= w.s.cfg.CheckpointBytes || time.Since(w.lastCkpt) >= w.s.cfg.CheckpointInterval) {
		w.checkpoint()
	}
}

// checkpoint persists the dedup index. It runs on the writer's goroutine,
// so the index and what it covers are consistent: every record below
// dedup.next (embedded) was synced, and every message in the index was
// acknowledged by Kafka or read back from it, before the checkpoint is
// written.
func (w *writer) checkpoint() {
	if n := w.s.store.TakeTailBytes(); n > 0 {
		w.dirty = true
	}
	if !w.dirty {
		return
	}
	w.dedup.Lock()
	w.ckptBuf = w.s.store.AppendCheckpoint(w.ckptBuf[:0])
	w.dedup.Unlock()
	if err := seglog.WriteMeta(w.s.cfg.DataDir, w.s.store.CheckpointName(), w.ckptBuf); err != nil {
		w.s.log.Warn("sink: dedup checkpoint not written; a restart will read more of the store", "err", err)
		return
	}
	w.s.m.checkpoints.Inc()
	w.lastCkpt, w.bytesSinceCkp, w.dirty = time.Now(), 0, false
}
