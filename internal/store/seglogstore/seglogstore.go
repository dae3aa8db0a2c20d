// Package seglogstore is the sink's embedded store: a seglog in
// DATA/store, opened with SyncAlways, one internal/storedmsg record per
// message, holding each payload as the agent sent it (compressed or not).
// It implements store.Store and keeps the dedup index's checkpoint in
// DATA/dedup.checkpoint.
package seglogstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/storedmsg"
	"github.com/sluicehq/sluice/seglog"
)

// CheckpointName is the dedup checkpoint's file name in the data
// directory.
const CheckpointName = "dedup.checkpoint"

// Options configure Open.
type Options struct {
	// DataDir holds the store (DataDir/store), the checkpoint and the
	// consumer groups' positions (DataDir/groups).
	DataDir string
	// MaxMessageBytes is the largest payload a message may have.
	MaxMessageBytes int64
	// SegmentBytes is the segment size; 0: seglog's default.
	SegmentBytes int64
	Logger       *slog.Logger
	// Registry gets the store's gauges (store_bytes, store_next_offset).
	Registry prometheus.Registerer
	// OnSync observes every fdatasync's duration; OnCorrupt counts store
	// records that are not stored messages. Both may be nil.
	OnSync    func(time.Duration)
	OnCorrupt func()
}

// Store is the embedded store. Only the storage writer's goroutine calls
// Append, AppendCheckpoint and Close.
type Store struct {
	o      Options
	groups *groupStore
	log    *seglog.Log
	d      *store.Dedup
	buf    []byte   // the headers of one Append
	heads  [][]byte // per message, its header in buf
	bodies [][]byte // per message, its payload as received
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Reader = (*Store)(nil)
)

// Open opens the seglog store and rebuilds the dedup index from the
// checkpoint and a scan of the store after it.
func Open(o Options) (*Store, *store.Dedup, error) {
	if o.OnSync == nil {
		o.OnSync = func(time.Duration) {}
	}
	if o.OnCorrupt == nil {
		o.OnCorrupt = func() {}
	}
	storeDir := filepath.Join(o.DataDir, "store")
	for _, dir := range []string{storeDir, filepath.Join(o.DataDir, "groups")} {
		if err := store.MkdirDurable(dir); err != nil {
			return nil, nil, fmt.Errorf("sink: create data directory: %w", err)
		}
	}
	opts := []seglog.Option{
		seglog.WithSync(syncPolicy()),
		seglog.WithLogger(o.Logger),
		// The largest message any sink may have stored, not this run's
		// --max-message: Open would take a record over the limit for a
		// damaged one and quarantine it (or refuse the store when records
		// follow it), so a sink restarted with a smaller --max-message
		// lost acknowledged messages (found by hand, 2026-11-29). New
		// messages are held to MaxMessageBytes when they are received.
		seglog.WithMaxRecordBytes(int(max(o.MaxMessageBytes, defaults.SinkMaxMessageLimit)) + storedmsg.HeaderSize + store.MaxAgentID),
		seglog.WithSyncObserver(o.OnSync),
	}
	if o.SegmentBytes > 0 {
		opts = append(opts, seglog.WithSegmentBytes(o.SegmentBytes))
	}
	log, err := seglog.Open(storeDir, opts...)
	if ce, bad := seglog.IsCorrupt(err); bad {
		return nil, nil, fmt.Errorf("sink: the store %s is damaged: %s; then start the sink again", storeDir, ce.RepairAdvice(storeDir))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sink: open store: %w", err)
	}
	e := &Store{o: o, log: log, groups: &groupStore{dir: filepath.Join(o.DataDir, "groups")}}
	start := time.Now()
	d, scanned, err := e.loadDedup()
	if err != nil {
		log.Close()
		return nil, nil, err
	}
	e.d = d
	o.Logger.Info("sink: store open", "store", "embedded", "dir", storeDir, "first", log.FirstOffset(), "next", log.NextOffset(),
		"agents", d.Agents(), "scanned", scanned, "took", time.Since(start).Round(time.Millisecond))
	base := storeSize(storeDir)
	if o.Registry != nil {
		o.Registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "store_bytes",
				Help: "Size of the store's segment files."}, func() float64 { return float64(base + log.Stats().Bytes) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "sink", Name: "store_next_offset",
				Help: "Offset the next stored message gets."}, func() float64 { return float64(log.NextOffset()) }),
		)
	}
	return e, d, nil
}

// Log is the seglog, for reads.
func (e *Store) Log() *seglog.Log { return e.log }

// Append writes msgs as one group commit: one write and one fdatasync.
// Each record is the storedmsg header and the payload as received; the
// header is encoded here and the payload goes to the log as it is
// (seglog.AppendParts), so a payload is copied once on its way to disk,
// into the log's write buffer.
func (e *Store) Append(msgs []*store.Message) (int64, error) {
	e.buf, e.heads, e.bodies = e.buf[:0], e.heads[:0], e.bodies[:0]
	var n int64
	for _, it := range msgs {
		m := storedmsg.Message{Codec: it.Codec, DictID: it.DictID, MessageID: it.ID, RecordCount: it.Records, AgentID: it.AgentB}
		start := len(e.buf)
		var err error
		if e.buf, err = storedmsg.Append(e.buf, &m); err != nil {
			// The session validated the fields, so this is a bug. Never
			// store what cannot be read back.
			it.DropErr = err
			continue
		}
		// Positions now, slices once buf has stopped growing.
		e.heads = append(e.heads, e.buf[start:len(e.buf):len(e.buf)])
		e.bodies = append(e.bodies, it.Body)
		n += int64(len(e.buf)-start) + int64(len(it.Body))
	}
	// buf may have moved while it grew: re-slice the heads from it.
	pos := 0
	for i, h := range e.heads {
		e.heads[i] = e.buf[pos : pos+len(h) : pos+len(h)]
		pos += len(h)
	}
	if len(e.heads) == 0 {
		return 0, nil
	}
	_, err := e.log.AppendParts(e.heads, e.bodies)
	clear(e.bodies) // the payloads are the writer's to drop
	if err != nil {
		return 0, err
	}
	// Only the writer's goroutine uses Next (here and in checkpoints).
	e.d.Next = e.log.NextOffset()
	return n, nil
}

func (e *Store) CheckpointName() string               { return CheckpointName }
func (e *Store) AppendCheckpoint(dst []byte) []byte   { return e.d.AppendCheckpoint(dst) }
func (e *Store) TakeTailBytes() int64                 { return 0 }
func (e *Store) Gate(context.Context) <-chan struct{} { return nil }
func (e *Store) Abort()                               {}
func (e *Store) Close() error                         { return e.log.Close() }

// loadDedup rebuilds the dedup index: it reads the checkpoint, if any and
// valid, then scans the store from the checkpoint's offset to the end,
// reading only the storedmsg headers.
func (e *Store) loadDedup() (*store.Dedup, uint64, error) {
	log := e.o.Logger
	first, next := e.log.FirstOffset(), e.log.NextOffset()
	d := store.NewDedup()
	b, err := seglog.ReadMeta(e.o.DataDir, CheckpointName)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		log.Warn("sink: dedup checkpoint unreadable; rebuilding from the whole store", "err", err)
	default:
		ck, err := store.ParseCheckpoint(b)
		switch {
		case err != nil:
			log.Warn("sink: dedup checkpoint invalid; rebuilding from the whole store", "err", err)
		case ck.Next > next:
			// The checkpoint is written only after what it covers was
			// synced, so the store cannot be shorter unless it was
			// replaced or damaged.
			log.Warn("sink: dedup checkpoint is ahead of the store; rebuilding from the whole store",
				"checkpoint", ck.Next, "store_next", next)
		default:
			d = ck
		}
	}
	from := max(d.Next, first)
	it := e.log.NewIterator(from, 1<<20)
	var scanned uint64
	for it.Next() {
		scanned++
		m, err := storedmsg.Decode(it.Value())
		if err != nil {
			e.o.OnCorrupt()
			log.Error("sink: store record is not a stored message; it cannot be deduplicated or read", "offset", it.Offset(), "err", err)
			continue
		}
		d.Add(string(m.AgentID), m.MessageID)
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("sink: scan store for dedup: %w", err)
	}
	d.Next = next
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

// syncPolicy is SyncAlways: Append returns, and the sink acks, only after
// an fdatasync.
func syncPolicy() seglog.SyncPolicy {
	if mutationAckBeforeFsync {
		return seglog.SyncNone()
	}
	return seglog.SyncAlways()
}
