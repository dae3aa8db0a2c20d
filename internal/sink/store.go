package sink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/seglog"
)

// embeddedStore is the sink's own store: a seglog in DataDir/store, opened
// with SyncAlways, one internal/storedmsg record per message.
type embeddedStore struct {
	s    *Sink
	log  *seglog.Log
	d    *dedupIndex
	buf  []byte
	recs [][]byte
}

// openEmbedded opens the seglog store and rebuilds the dedup index from the
// checkpoint and a scan of the store after it.
func openEmbedded(s *Sink) (*embeddedStore, *dedupIndex, error) {
	cfg := s.cfg
	for _, d := range []string{"store", "groups"} {
		if err := mkdirDurable(filepath.Join(cfg.DataDir, d)); err != nil {
			return nil, nil, fmt.Errorf("sink: create data directory: %w", err)
		}
	}
	opts := []seglog.Option{
		seglog.WithSync(seglog.SyncAlways()),
		seglog.WithLogger(s.log),
		seglog.WithMaxRecordBytes(int(cfg.MaxMessageBytes) + storedmsg.HeaderSize + maxAgentID),
		seglog.WithSyncObserver(func(d time.Duration) { s.m.fsync.Observe(d.Seconds()) }),
	}
	if cfg.SegmentBytes > 0 {
		opts = append(opts, seglog.WithSegmentBytes(cfg.SegmentBytes))
	}
	storeDir := filepath.Join(cfg.DataDir, "store")
	log, err := seglog.Open(storeDir, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("sink: open store: %w", err)
	}
	e := &embeddedStore{s: s, log: log}
	start := time.Now()
	d, scanned, err := e.loadDedup()
	if err != nil {
		log.Close()
		return nil, nil, err
	}
	e.d = d
	s.log.Info("sink: store open", "store", "embedded", "dir", storeDir, "first", log.FirstOffset(), "next", log.NextOffset(),
		"agents", len(d.agents), "scanned", scanned, "took", time.Since(start).Round(time.Millisecond))
	base := storeSize(storeDir)
	cfg.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "store_bytes",
			Help: "Size of the store's segment files."}, func() float64 { return float64(base + log.Stats().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "store_next_offset",
			Help: "Offset the next stored message gets."}, func() float64 { return float64(log.NextOffset()) }),
	)
	return e, d, nil
}

func (e *embeddedStore) Append(msgs []*store.Message) (int64, error) {
	e.buf, e.recs = e.buf[:0], e.recs[:0]
	for _, it := range msgs {
		m := storedmsg.Message{Codec: it.Codec, DictID: it.DictID, MessageID: it.ID, RecordCount: it.Records,
			AgentID: it.AgentB, Body: it.Body}
		start := len(e.buf)
		var err error
		if e.buf, err = storedmsg.Append(e.buf, &m); err != nil {
			// The stream validated the fields, so this is a bug. Never
			// store what cannot be read back.
			it.DropErr = err
			continue
		}
		// Positions now, slices once buf has stopped growing.
		e.recs = append(e.recs, e.buf[start:len(e.buf):len(e.buf)])
	}
	// buf may have moved while it grew: re-slice the records from it.
	pos := 0
	for i, r := range e.recs {
		e.recs[i] = e.buf[pos : pos+len(r) : pos+len(r)]
		pos += len(r)
	}
	if len(e.recs) == 0 {
		return 0, nil
	}
	if _, err := e.log.Append(e.recs); err != nil {
		return 0, err
	}
	// Only the writer's goroutine uses next (here and in checkpoints).
	e.d.next = e.log.NextOffset()
	return int64(len(e.buf)), nil
}

func (e *embeddedStore) CheckpointName() string             { return checkpointName }
func (e *embeddedStore) AppendCheckpoint(dst []byte) []byte { return e.d.appendCheckpoint(dst) }
func (e *embeddedStore) TakeTailBytes() int64               { return 0 }
func (e *embeddedStore) Gate(context.Context) <-chan struct{} {
	return nil
}
func (e *embeddedStore) Abort()       {}
func (e *embeddedStore) Close() error { return e.log.Close() }

// loadDedup rebuilds the dedup index: it reads the checkpoint, if any and
// valid, then scans the store from the checkpoint's offset to the end,
// reading only the storedmsg headers.
func (e *embeddedStore) loadDedup() (*dedupIndex, uint64, error) {
	s := e.s
	first, next := e.log.FirstOffset(), e.log.NextOffset()
	d := newDedupIndex()
	b, err := seglog.ReadMeta(s.cfg.DataDir, checkpointName)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		s.log.Warn("sink: dedup checkpoint unreadable; rebuilding from the whole store", "err", err)
	default:
		ck, err := parseCheckpoint(b)
		switch {
		case err != nil:
			s.log.Warn("sink: dedup checkpoint invalid; rebuilding from the whole store", "err", err)
		case ck.next > next:
			// The checkpoint is written only after what it covers was
			// synced, so the store cannot be shorter unless it was
			// replaced or damaged.
			s.log.Warn("sink: dedup checkpoint is ahead of the store; rebuilding from the whole store",
				"checkpoint", ck.next, "store_next", next)
		default:
			d = ck
		}
	}
	from := max(d.next, first)
	it := e.log.NewIterator(from, 1<<20)
	var scanned uint64
	for it.Next() {
		scanned++
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			s.m.corrupt.Inc()
			s.log.Error("sink: store record is not a stored message; it cannot be deduplicated or read", "offset", it.Offset(), "err", err)
			continue
		}
		d.set(string(m.AgentID)).add(m.MessageID)
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("sink: scan store for dedup: %w", err)
	}
	d.next = next
	return d, scanned, nil
}

// storeSize sums the sizes of the segment files in dir.
func storeSize(dir string) uint64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n uint64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".seg") {
			if fi, err := e.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
	}
	return n
}
