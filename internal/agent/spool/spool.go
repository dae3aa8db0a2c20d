// Package spool is the agent's durable queue: a seglog of messages whose
// offsets are their delivery ids, the agent's stable id, the acknowledged
// watermark and the producers' progress marks (what makes ingest retries
// exact), and the quota that bounds it on disk. It knows nothing of the
// network: ingest appends to it, the driver reads from it and reports
// acknowledgements.
package spool

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/agent/deadletter"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/internal/kafkarec"
	"github.com/sluicehq/sluice/seglog"
)

// A spooled message is one seglog record (a Record):
//
//	0  uint8   spool record version (1)
//	1  uint8   codec kind (codec.Plain, codec.Zstd, codec.ZstdDict,
//	           codec.KafkaZstd: a Kafka records section whose sluice
//	           headers carry this record's offset as the message id)
//	2  uint32  dictionary id (0 unless ZstdDict)
//	6  uint32  number of records in the body
//	10 uint16  number of producer marks, then per Mark:
//	           uint8 length, producer id, uint64 sequence,
//	           uint32 records of the request spooled up to here,
//	           uint8 1 if that is the whole request
//	.. body    the message as it goes on the wire (internal/batch, compressed)
//
// The message id on the wire is the record's offset in the spool. A Mark is
// stored in every message holding records of a producer's request, so the
// Progress of each request is durable exactly when its records are: after a
// crash in the middle of a request split over several messages, a retry
// spools only the records that are missing. This is what makes ingest
// retries exact.
// Errors of an append, to test with errors.Is.
var (
	// ErrFull: the spool reached its quota.
	ErrFull = errors.New("agent: spool quota reached")
	// ErrNoSpace: the spool's disk is full (ENOSPC or EDQUOT).
	ErrNoSpace = errors.New("agent: no space left on the spool's disk")
)

// Spooled tells the driver a message is in the spool.
type Spooled struct {
	ID      uint64
	Size    int64 // wire bytes
	Records int
	Raw     int   // uncompressed bytes
	At      int64 // the agent's clock
	// Rec, when set, is the spool record as appended (from GetBuf): the
	// driver may send the message from it instead of reading it back, and
	// then owns it (PutBuf when done). Nil for messages spooled before
	// the start.
	Rec *[]byte
}

// bufPool holds spool record buffers: ingest encodes a message into one
// and appends it; the driver sends the fresh message from it and puts it
// back, so a message is read back from disk only when it is resent.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// GetBuf returns an empty record buffer.
func GetBuf() *[]byte {
	b := bufPool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// PutBuf returns a buffer from GetBuf; nil is ignored.
func PutBuf(b *[]byte) {
	if b != nil {
		bufPool.Put(b)
	}
}

const (
	markTail          = 8 + 4 + 1 // seq, done, complete
	spoolVersion      = 1
	spoolFixedHeader  = 12
	MaxProducerIDLen  = 64
	maxMarksPerRecord = 1 << 16
)

// Mark records how far request Seq of Producer is spooled.
type Mark struct {
	Producer string
	Seq      uint64
	Done     uint32 // records of the request spooled, this message included
	Complete bool   // Done is the whole request
}

// Progress is the newest request of a producer and how far it got.
type Progress struct {
	Seq      uint64
	Done     uint32
	Complete bool
}

// Before reports whether m is further along than p.
func (p Progress) Before(m Mark) bool {
	return m.Seq > p.Seq || (m.Seq == p.Seq && (m.Done > p.Done || (m.Complete && !p.Complete)))
}

// Record is a decoded spool record; Body aliases the buffer it came from.
type Record struct {
	Kind    codec.Kind
	DictID  uint32
	Records uint32
	Marks   []Mark
	Body    []byte
}

// AppendHeader appends everything but the body.
func AppendHeader(dst []byte, m Record) []byte {
	dst = append(dst, spoolVersion, byte(m.Kind))
	dst = binary.LittleEndian.AppendUint32(dst, m.DictID)
	dst = binary.LittleEndian.AppendUint32(dst, m.Records)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(m.Marks)))
	for _, mk := range m.Marks {
		dst = append(dst, byte(len(mk.Producer)))
		dst = append(dst, mk.Producer...)
		dst = binary.LittleEndian.AppendUint64(dst, mk.Seq)
		dst = binary.LittleEndian.AppendUint32(dst, mk.Done)
		dst = append(dst, boolByte(mk.Complete))
	}
	return dst
}

func Append(dst []byte, m Record) []byte {
	return append(AppendHeader(dst, m), m.Body...)
}

var ErrBadRecord = errors.New("agent: malformed spool record")

func Decode(b []byte) (Record, error) {
	if len(b) < spoolFixedHeader {
		return Record{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrBadRecord, len(b), spoolFixedHeader)
	}
	if b[0] != spoolVersion {
		return Record{}, fmt.Errorf("%w: version %d", ErrBadRecord, b[0])
	}
	k := codec.Kind(b[1])
	if k != codec.Plain && k != codec.Zstd && k != codec.ZstdDict && k != codec.KafkaZstd {
		return Record{}, fmt.Errorf("%w: codec %d", ErrBadRecord, b[1])
	}
	m := Record{Kind: k, DictID: binary.LittleEndian.Uint32(b[2:6]), Records: binary.LittleEndian.Uint32(b[6:10])}
	if (k == codec.ZstdDict) != (m.DictID != 0) {
		return Record{}, fmt.Errorf("%w: codec %v with dictionary id %d", ErrBadRecord, k, m.DictID)
	}
	n := int(binary.LittleEndian.Uint16(b[10:12]))
	p := spoolFixedHeader
	for i := 0; i < n; i++ {
		if p >= len(b) {
			return Record{}, fmt.Errorf("%w: Mark %d cut short", ErrBadRecord, i)
		}
		l := int(b[p])
		if l == 0 || l > MaxProducerIDLen || p+1+l+markTail > len(b) {
			return Record{}, fmt.Errorf("%w: Mark %d: producer id of %d bytes at %d", ErrBadRecord, i, l, p)
		}
		t := b[p+1+l:]
		if t[12] > 1 {
			return Record{}, fmt.Errorf("%w: Mark %d: complete flag %d", ErrBadRecord, i, t[12])
		}
		m.Marks = append(m.Marks, Mark{Producer: string(b[p+1 : p+1+l]), Seq: binary.LittleEndian.Uint64(t),
			Done: binary.LittleEndian.Uint32(t[8:]), Complete: t[12] == 1})
		p += 1 + l + markTail
	}
	m.Body = b[p:]
	return m, nil
}

// Spool is the agent's durable queue: a seglog of messages, the agent's
// stable id, and the acknowledged watermark.
type Spool struct {
	dir    string
	logger *slog.Logger
	lock   *dirlock.Lock
	seg    *seglog.Log
	id     string
	quota  int64

	mu        sync.Mutex
	watermark uint64 // every id below is acknowledged (persisted)
	// producers maps a producer id to the Progress of its newest request
	// (see Mark).
	producers map[string]Progress
	// warnings are what openSpool had to work around, for New to log.
	warnings  []string
	diskBytes int64 // segment bytes on disk, refreshed after removals
	appended  int64 // bytes appended since diskBytes was measured
	reserved  int64 // quota reserved by ingest calls not yet spooled
	// noSpace is the last append's ENOSPC/EDQUOT error, cleared by the
	// next successful append; broken is a failed fdatasync, which only a
	// restart clears (seglog.ErrBroken).
	noSpace, broken error
	// unreadable is the first record the driver could not read back (see
	// ReadFailed).
	unreadable error

	// opts are the log's options, which the dead-letter log shares (its
	// filesystem, sync policy, record limit); dead is that log, opened by
	// the first SetAside.
	opts []seglog.Option
	dead *seglog.Log

	// sentBelow bounds the ids sent under the agent id, persisted in
	// sentFile (sent.go); sentKnown is false while a spool that sent
	// messages has no readable bound.
	sentMu      sync.Mutex
	sentBelow   uint64
	sentKnown   bool
	sentRetryAt uint64   // while unknown for want of space: the id at which to try the file again
	sentF       *os.File // the file, open from the first write
	sentSlot    int      // the slot holding sentBelow
	sentSeq     uint32   // its sequence number
	// pressedAt overrides the size at which the spool is Pressed.
	pressedAt int64
	// appendFailed is the last append's failure other than a full disk or
	// a broken log, until an append succeeds or the log directory takes a
	// file again (Writable); under mu.
	appendFailed error
	// deadIDs are the ids of the messages in the dead-letter log, from
	// earlier runs too (under mu).
	deadIDs map[uint64]bool
}

const (
	agentIDFile = "agent-id"
	// stateFile holds the acknowledged watermark and the producer table,
	// written together so they never disagree.
	stateFile = "delivery-state"
)

// hasHistory reports whether the spool directory holds a delivery state
// or a record: an agent has spooled under its id. (The empty first
// segment a start creates is no history.)
func hasHistory(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
		return true
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "log"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		if info, err := e.Info(); err != nil || info.Size() > 0 || e.Name() != fmt.Sprintf("%020d.seg", 0) {
			return true
		}
	}
	return false
}

func Open(dir string, quota int64, wantID string, logger *slog.Logger, opts ...seglog.Option) (sp *Spool, err error) {
	return open(dir, quota, wantID, false, logger, opts...)
}

// OpenChangingID is Open, except that a spool holding messages under
// another id takes wantID (when not empty) instead of refusing it: its
// messages not yet acknowledged go to the sink again under wantID. For a
// spool whose sink refuses its id because another spool numbered
// messages under it (protocol.IDsTakenDetail): under the old id they
// would never be stored; under a new one they are, once, or twice for any
// the old id had stored.
func OpenChangingID(dir string, quota int64, wantID string, logger *slog.Logger, opts ...seglog.Option) (*Spool, error) {
	return open(dir, quota, wantID, true, logger, opts...)
}

func open(dir string, quota int64, wantID string, changeID bool, logger *slog.Logger, opts ...seglog.Option) (sp *Spool, err error) {
	// One process per spool: a second writer would interleave appends
	// and break checksums, and acknowledge records the other never sent.
	lock, err := dirlock.Acquire(dir, "spool")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.Release()
		}
	}()
	s := &Spool{dir: dir, quota: quota, lock: lock, logger: logger, opts: opts}
	fresh := !hasHistory(dir)
	id, err := seglog.ReadMeta(dir, agentIDFile)
	// lost: the spool was used under an id its agent-id file no longer
	// gives (deleted, or damaged). A new id would have the sink store its
	// unacknowledged messages a second time; the old one, given with
	// --agent-id, is written back.
	lost := errors.Is(err, seglog.ErrMetaCorrupt) || errors.Is(err, os.ErrNotExist) && hasHistory(dir)
	switch {
	case lost && wantID == "":
		why := fmt.Sprintf("holds messages or a delivery state but no %s file (deleted, or lost)", agentIDFile)
		if !errors.Is(err, os.ErrNotExist) {
			why = err.Error()
		}
		return nil, fmt.Errorf("agent: spool %s %s: under a new id the sink would store its unacknowledged messages a second time. "+
			"Start it with --agent-id set to the id it had (its own earlier logs say \"agent started agent_id=ID\", the sink's say agent_id=ID), "+
			"which is written back; or, to start over under a new id, move %s and %s out of the directory",
			dir, why, filepath.Join(dir, "log"), filepath.Join(dir, stateFile))
	case lost || errors.Is(err, os.ErrNotExist):
		id = []byte(wantID)
		if wantID == "" {
			var b [12]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, err
			}
			id = []byte("agent-" + hex.EncodeToString(b[:]))
		}
		if werr := seglog.WriteMeta(dir, agentIDFile, id); werr != nil {
			return nil, werr
		}
		if lost {
			s.warnings = append(s.warnings, fmt.Sprintf("the %s file was lost (%v); written again with --agent-id %q", agentIDFile, err, wantID))
		}
	case err != nil:
		return nil, fmt.Errorf("agent: spool %s: %w", dir, err)
	case wantID != "" && string(id) != wantID && changeID:
		// Nothing was sent under the new id: the bound starts again, and
		// a sink holding ids under it from another spool refuses this one
		// too. Written first: a crash between the two leaves the old id
		// with a bound of 0, which a sink refuses, never one too high.
		if err := resetSent(dir); err != nil {
			return nil, err
		}
		if err := seglog.WriteMeta(dir, agentIDFile, []byte(wantID)); err != nil {
			return nil, err
		}
		s.warnings = append(s.warnings, fmt.Sprintf("agent id changed from %q to %q (--change-agent-id): the messages not yet acknowledged go to the sink under the new id", id, wantID))
		id = []byte(wantID)
	case wantID != "" && string(id) != wantID && !hasHistory(dir):
		// Nothing was ever spooled under the old id (an agent started
		// without --agent-id, its token refused for it): take the new one.
		if err := seglog.WriteMeta(dir, agentIDFile, []byte(wantID)); err != nil {
			return nil, err
		}
		s.warnings = append(s.warnings, fmt.Sprintf("agent id changed from %q to %q: the spool never held a message under the old one", id, wantID))
		id = []byte(wantID)
	case wantID != "" && string(id) != wantID:
		// The sink deduplicates by (agent id, message id): under a new id
		// every unacknowledged message would be stored again, and message
		// ids restart their meaning.
		return nil, fmt.Errorf("agent: spool %s belongs to agent id %q, not %q: changing an agent's identity breaks deduplication at the sink; use a new spool directory for a new id, or drop the agent id setting to keep %q "+
			"(or add --change-agent-id to send its unacknowledged messages under the new id: for a spool whose sink refuses its id as taken by another spool)",
			dir, id, wantID, id)
	}
	s.id = string(id)
	s.loadSent(fresh)
	state, err := seglog.ReadMeta(dir, stateFile)
	if err == nil {
		s.watermark, s.producers, err = decodeState(state)
	}
	stateLost := ""
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.producers = map[string]Progress{}
	case errors.Is(err, seglog.ErrMetaCorrupt) || err != nil && state != nil:
		// Never wedge on it: the log says what is spooled, and the sink
		// drops what it has. The state is moved aside, and every message
		// in the spool is sent again (below, once the log is open).
		aside := fmt.Sprintf("%s.damaged-%d", stateFile, time.Now().UnixNano())
		if rerr := os.Rename(filepath.Join(dir, stateFile), filepath.Join(dir, aside)); rerr != nil {
			return nil, fmt.Errorf("agent: spool %s: %s is damaged (%v) and cannot be moved aside: %w", dir, stateFile, err, rerr)
		}
		stateLost = fmt.Sprintf("%s was damaged (%v) and is moved to %s", stateFile, err, aside)
		s.watermark, s.producers = 0, map[string]Progress{}
	case err != nil:
		return nil, fmt.Errorf("agent: spool %s: %w", dir, err)
	}
	logDir := filepath.Join(dir, "log")
	s.seg, err = seglog.Open(logDir, opts...)
	if err != nil {
		if ce, bad := seglog.IsCorrupt(err); bad {
			return nil, fmt.Errorf("agent: spool %s is damaged: %s; then start the agent again (records acknowledged by the sink are not needed again)",
				dir, ce.RepairAdvice(logDir))
		}
		return nil, err
	}
	if stateLost != "" {
		s.watermark = s.seg.FirstOffset()
		s.warnings = append(s.warnings, stateLost+fmt.Sprintf(": every message in the spool, from id %d, is sent again (the sink stores each once); "+
			"the producers' retry marks are lost, so an ingest request retried across this restart may be spooled twice", s.watermark))
	}
	if next := s.seg.NextOffset(); s.watermark > next {
		// The log lost records the sink had acknowledged (a repair cut it
		// short). Never reuse their ids: the sink would take new messages
		// under them for duplicates. Move the log forward instead.
		if _, err := s.seg.RemoveBefore(s.watermark); err != nil {
			s.seg.Close()
			return nil, fmt.Errorf("agent: spool %s: move the log from %d to the acknowledged watermark %d: %w", dir, next, s.watermark, err)
		}
		s.warnings = append(s.warnings, fmt.Sprintf("acknowledged watermark %d is beyond the log's end %d (a repair removed acknowledged records); new messages start at %d", s.watermark, next, s.watermark))
	}
	// Free what the sink acknowledged before this start: sealed segments
	// below the watermark, and the active segment when all of it is
	// acknowledged (it is replaced by an empty one at the watermark). Left
	// in place, a consumed segment that fills the disk would refuse every
	// append, and no acknowledgement would come to free it: the backlog is
	// empty.
	if _, err := s.seg.RemoveBefore(s.watermark); err != nil {
		s.warnings = append(s.warnings, fmt.Sprintf("cannot free the acknowledged spool segments below %d: %v", s.watermark, err))
	}
	if first := s.seg.FirstOffset(); s.watermark < first {
		// Gone before their ack was persisted: removed after their ack
		// when the disk was too full to write the state file, or lost.
		s.warnings = append(s.warnings, fmt.Sprintf("messages %d to %d are not in the spool (the log starts at %d); unless they were acknowledged while the disk was full, they are lost", s.watermark, first-1, first))
		s.watermark = first
	}
	s.measure()
	s.deadIDs = map[uint64]bool{}
	if err := deadletter.ReadUnique(filepath.Join(dir, deadletter.Dir), func(l deadletter.Letter) error {
		s.deadIDs[l.ID] = true
		return nil
	}); err != nil {
		s.warnings = append(s.warnings, fmt.Sprintf("the dead-letter log cannot be read whole: %v", err))
	}
	if n := len(s.deadIDs); n > 0 {
		s.warnings = append(s.warnings, fmt.Sprintf("%d messages the sink refused for good are in %s: `sluice dead-letter list %s` prints them, `sluice dead-letter clear %s` removes them",
			n, filepath.Join(dir, deadletter.Dir), dir, dir))
	}
	if damaged, _ := deadletter.Damaged(dir); len(damaged) > 0 {
		s.warnings = append(s.warnings, fmt.Sprintf("%s moved aside earlier (%s): `sluice dead-letter list %s` prints their intact letters with the others, `sluice dead-letter clear %s` removes them",
			defaults.Plural(len(damaged), "damaged dead-letter log"), strings.Join(damaged, ", "), dir, dir))
	}
	return s, nil
}

// measure recomputes the spool's size on disk.
func (s *Spool) measure() {
	var total int64
	entries, _ := os.ReadDir(filepath.Join(s.dir, "log"))
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			total += info.Size()
		}
	}
	s.mu.Lock()
	s.diskBytes, s.appended = total, 0
	s.mu.Unlock()
}

// Reserve checks the quota for n more bytes and counts them. When they do
// not fit it first frees what is acknowledged: RemoveBefore may have left
// the active segment in place while an append was running.
func (s *Spool) Reserve(n int64) bool {
	if s.noSpaceErr() != nil {
		// The last append found the disk full: free what is acknowledged,
		// the consumed active segment included, before trying again.
		s.reclaim()
	}
	if s.tryReserve(n) {
		return true
	}
	s.reclaim()
	return s.tryReserve(n)
}

func (s *Spool) tryReserve(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quota > 0 && s.diskBytes+s.appended+s.reserved+n > s.quota {
		return false
	}
	s.reserved += n
	return true
}

func (s *Spool) noSpaceErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noSpace
}

// diskTight reports whether the spool's disk is short of space: the last
// append failed for it, or the disk has less free than the spool holds.
// Then a fully acknowledged active segment is released at once (see
// Acknowledge), since the disk may fill before the segment is sealed, and
// nothing else would free it.
func (s *Spool) diskTight() bool {
	s.mu.Lock()
	noSpace, size := s.noSpace, s.diskBytes+s.appended
	s.mu.Unlock()
	if noSpace != nil {
		return true
	}
	free, err := diskFree(filepath.Join(s.dir, "log"))
	return err == nil && free < size
}

// diskFree is the space available to unprivileged writers on dir's disk.
func diskFree(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// DiskRoom is how large a spool in dir can grow on its disk: the disk's
// free space plus what the spool's log already holds. dir need not exist
// yet (its nearest existing parent is measured). The agent sizes spool
// segments from it as well as from the quota, so that a disk smaller than
// the quota still holds several segments and acknowledged ones free it.
func DiskRoom(dir string) (int64, error) {
	probe := filepath.Clean(dir)
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			break
		}
		probe = parent
	}
	free, err := diskFree(probe)
	if err != nil {
		return 0, err
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "log"))
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			free += info.Size()
		}
	}
	return free, nil
}

// reclaim removes acknowledged segments.
func (s *Spool) reclaim() {
	n, err := s.seg.RemoveBefore(s.AckedWatermark())
	if n > 0 {
		s.measure()
	}
	if err != nil && !errors.Is(err, seglog.ErrClosed) {
		s.logger.Warn("agent: freeing acknowledged spool segments failed", "err", err)
	}
}

// Size is the spool's bytes on disk plus what ingest calls reserved.
func (s *Spool) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.diskBytes + s.appended + s.reserved
}

// Acknowledge persists a new watermark, with the producer table as it is
// now (every entry in it is durably spooled, so it is safe to persist), and
// then deletes segments below the watermark. When the disk is full the
// segments are deleted even though the state file could not be written:
// the sink has them, so the only cost is a warning at the next start, and
// it is what frees the disk the spool itself filled. The caller retries
// the state file.
func (s *Spool) Acknowledge(w uint64) error {
	s.mu.Lock()
	if w <= s.watermark {
		s.mu.Unlock()
		return nil
	}
	persisted := w
	if mutationWatermarkAhead {
		persisted++
	}
	state := encodeState(persisted, s.producers)
	s.mu.Unlock()
	if err := seglog.WriteMeta(s.dir, stateFile, state); err != nil {
		if IsNoSpace(err) {
			if n, _ := s.seg.RemoveBefore(w); n > 0 {
				s.measure()
			}
		}
		return err
	}
	s.mu.Lock()
	s.watermark = w
	s.mu.Unlock()
	upTo := w
	if s.quota > 0 && s.Size() < s.quota/2 && w > 0 && !s.diskTight() {
		// Far from the quota and with room on the disk, keep the active
		// segment even when all of it is acknowledged: with a trickle of
		// records, replacing it on every ack would create and delete a
		// file every 100 ms. Sealed segments go as usual; under quota
		// pressure reclaim replaces it, and on a tight disk it goes now
		// (a disk smaller than a segment would otherwise stay full of
		// acknowledged records).
		upTo = w - 1
	}
	n, err := s.seg.RemoveBefore(upTo)
	if n > 0 {
		s.measure()
	}
	return err
}

// IsNoSpace reports whether err is the disk (or the user's disk quota)
// being full.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// AppendDone records the outcome of an append for Writable.
func (s *Spool) AppendDone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.noSpace, s.appendFailed = nil, nil
	case IsNoSpace(err):
		s.noSpace = err
	case errors.Is(err, seglog.ErrBroken):
		s.broken = err
	default:
		// Any other failure (a segment the directory's permissions do not
		// let it create, an I/O error): not ready until the log directory
		// takes a file again (Writable), else ready said 200 while every
		// ingest got 500 (found by hand).
		s.appendFailed = err
	}
}

// Broken is the failed fdatasync that left the spool unwritable until
// the process restarts, or nil.
func (s *Spool) Broken() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// ReadFailed records that a record appended earlier could not be read
// back: bytes on disk changed under the running agent. Appends still work,
// so ingest goes on, but the damage stays until someone repairs the log,
// and the start-up check is what finds it and names it: the agent reports
// itself unhealthy (Unreadable) so a supervisor restarts it into that check.
func (s *Spool) ReadFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unreadable == nil {
		s.unreadable = err
	}
}

// Unreadable is the first read failure ReadFailed recorded, or nil.
func (s *Spool) Unreadable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unreadable
}

// Writable is nil when an append can be expected to succeed.
func (s *Spool) Writable(headroom int64) error {
	s.mu.Lock()
	broken, noSpace, failed := s.broken, s.noSpace, s.appendFailed
	s.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("spool %s cannot be written until the agent restarts: %w", s.dir, broken)
	}
	if failed != nil {
		// Ready again once the directory takes a new file (a segment is
		// one), so a probe does not keep traffic away after the fix.
		f, err := os.CreateTemp(filepath.Join(s.dir, "log"), ".writable-*")
		if err != nil {
			return fmt.Errorf("spool %s: the last append failed (%v), and its log directory takes no new file: %w", s.dir, failed, err)
		}
		f.Close()
		os.Remove(f.Name())
		s.mu.Lock()
		if s.appendFailed == failed {
			s.appendFailed = nil
		}
		s.mu.Unlock()
	}
	if noSpace != nil {
		// Ready again once the disk has room for a few messages, so a
		// readiness probe does not keep traffic away forever. What the
		// sink acknowledged is freed first.
		if free, err := diskFree(filepath.Join(s.dir, "log")); err != nil || free < 4*headroom {
			s.reclaim()
			if free, err := diskFree(filepath.Join(s.dir, "log")); err != nil || free < 4*headroom {
				return fmt.Errorf("%w: %v", ErrNoSpace, noSpace)
			}
		}
	}
	if s.quota > 0 && s.Size()+headroom > s.quota {
		s.reclaim()
		if sz := s.Size(); sz+headroom > s.quota {
			return fmt.Errorf("%w (%d bytes on disk, quota %d: no room for %d more)", ErrFull, sz, s.quota, headroom)
		}
	}
	return nil
}

// ProgressOf is the progress of producer's newest request.
func (s *Spool) ProgressOf(producer string) Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.producers[producer]
}

// Completed records the marks of spooled messages.
func (s *Spool) Completed(marks []Mark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range marks {
		if p := s.producers[m.Producer]; p.Before(m) {
			s.producers[m.Producer] = Progress{Seq: m.Seq, Done: m.Done, Complete: m.Complete}
		}
	}
	// Producers are one per `sluice produce` run; forget the oldest-looking
	// ones (lowest sequence) past a bound so the table stays small. A
	// forgotten producer's retry could duplicate one request; 100k idle
	// producers make that remote.
	for len(s.producers) > maxProducers {
		var victim string
		low := ^uint64(0)
		for p, q := range s.producers {
			if q.Seq < low {
				victim, low = p, q.Seq
			}
		}
		delete(s.producers, victim)
	}
}

const maxProducers = 100_000

// WriteState sets the persisted acknowledged watermark of a spool that no
// process has open, with an empty producer table: for repair tools and
// tests that fake what a sink acknowledged.
func WriteState(dir string, watermark uint64) error {
	return seglog.WriteMeta(dir, stateFile, encodeState(watermark, nil))
}

func encodeState(w uint64, producers map[string]Progress) []byte {
	b := binary.LittleEndian.AppendUint64(nil, w)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(producers)))
	for p, q := range producers {
		b = append(b, byte(len(p)))
		b = append(b, p...)
		b = binary.LittleEndian.AppendUint64(b, q.Seq)
		b = binary.LittleEndian.AppendUint32(b, q.Done)
		b = append(b, boolByte(q.Complete))
	}
	return b
}

func decodeState(b []byte) (uint64, map[string]Progress, error) {
	if len(b) < 12 {
		return 0, nil, fmt.Errorf("%d bytes, want at least 12", len(b))
	}
	w := binary.LittleEndian.Uint64(b)
	n := int(binary.LittleEndian.Uint32(b[8:]))
	producers := make(map[string]Progress, min(n, maxProducers))
	p := 12
	for i := 0; i < n; i++ {
		if p >= len(b) {
			return 0, nil, fmt.Errorf("producer %d cut short", i)
		}
		l := int(b[p])
		if l == 0 || p+1+l+markTail > len(b) {
			return 0, nil, fmt.Errorf("producer %d: bad length %d at %d", i, l, p)
		}
		t := b[p+1+l:]
		producers[string(b[p+1:p+1+l])] = Progress{Seq: binary.LittleEndian.Uint64(t),
			Done: binary.LittleEndian.Uint32(t[8:]), Complete: t[12] == 1}
		p += 1 + l + markTail
	}
	if p != len(b) {
		return 0, nil, fmt.Errorf("%d trailing bytes", len(b)-p)
	}
	return w, producers, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// AckedWatermark is the persisted acknowledged watermark: every id below
// it is acknowledged by the sink.
func (s *Spool) AckedWatermark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watermark
}

// ID is the agent's stable id, kept in the spool directory.
func (s *Spool) ID() string { return s.id }

// Log is the spool's log: message id = offset. Readers (the driver) make
// their own iterators; only ingest appends.
func (s *Spool) Log() *seglog.Log { return s.seg }

// Warnings are what Open had to work around, for the caller to log.
func (s *Spool) Warnings() []string { return s.warnings }

// Close closes the log and releases the directory lock.
func (s *Spool) Close() error {
	err := errors.Join(s.seg.Close(), s.closeSent())
	if s.dead != nil {
		err = errors.Join(err, s.dead.Close())
	}
	s.lock.Release()
	return err
}

// Pressed reports whether the spool needs the room that messages parked
// below the watermark hold: half its quota is in use (the point where an
// acknowledged active segment is no longer kept either; SetPressedAt
// changes it), or its disk is tight. The driver then sets parked
// messages aside (SetAside).
func (s *Spool) Pressed() bool {
	at := s.quota / 2
	if s.pressedAt > 0 {
		at = s.pressedAt
	}
	return at > 0 && s.Size() >= at || s.diskTight()
}

// SetPressedAt makes the spool Pressed from n bytes on (0: half the
// quota). Call it before the driver starts.
func (s *Spool) SetPressedAt(n int64) { s.pressedAt = n }

// deadLetterSegmentBytes keeps the dead-letter log's segments small: it
// holds a few messages, on a disk that may be nearly full.
const deadLetterSegmentBytes = 4 << 20

// Refused is a parked message to set aside, and why the sink refused it
// for good.
type Refused struct {
	ID           uint64
	Code, Detail string
}

// SetAside copies spooled message id, which a sink refused for good
// with code and detail, to the dead-letter log: SetAsideMany of one. It
// returns the letter's bytes, 0 for a message the log already held.
func (s *Spool) SetAside(id uint64, code, detail string, at time.Time) (int, error) {
	res, err := s.SetAsideMany([]Refused{{id, code, detail}}, at)
	return res.Copied, err
}

// SetAsideMany copies spooled messages, which a sink refused for good, to
// the dead-letter log (DIR/dead-letter), in rs's order, and returns once
// the copies are durable (SetAsideResult says how many). The
// caller then settles those messages (delivery.SetAside); the segments
// they held go with the watermark. The letters go into the log as a
// few appends of up to setAsideBatchBytes, one fsync each, not one per
// message: a sink refusing thousands (a payload it will never take)
// would otherwise hold the driver's loop for thousands of fsyncs. A
// message the log already holds (copied before a crash that came
// before the watermark moved past it) is not copied again. On an error,
// the messages before the one that failed are done.
func (s *Spool) SetAsideMany(rs []Refused, at time.Time) (SetAsideResult, error) {
	var res SetAsideResult
	if len(rs) == 0 {
		return res, nil
	}
	// Opened first: a damaged log is moved aside when it is opened, and
	// the ids it held are forgotten (openDeadLetters) before any is
	// taken as held below.
	if err := s.openDeadLettersOnce(); err != nil {
		return res, err
	}
	var recs [][]byte
	pending, size, held := 0, 0, 0 // rs[res.Done:res.Done+pending] are in recs, or held
	flush := func() error {
		if len(recs) > 0 {
			if _, err := s.dead.Append(recs); err != nil {
				return fmt.Errorf("agent: set %d messages aside: %w", len(recs), err)
			}
		}
		s.mu.Lock()
		for _, r := range rs[res.Done : res.Done+pending] {
			s.deadIDs[r.ID] = true
		}
		s.mu.Unlock()
		res.Done, res.Copied, res.Held = res.Done+pending, res.Copied+size, res.Held+held
		recs, pending, size, held = recs[:0], 0, 0, 0
		return nil
	}
	for _, r := range rs {
		s.mu.Lock()
		inLog := s.deadIDs[r.ID] && !mutationDeadLetterRecopy
		s.mu.Unlock()
		if !inLog {
			rec, err := s.letter(r, at)
			if err != nil {
				return res, errors.Join(flush(), err)
			}
			recs = append(recs, rec)
			size += len(rec)
		} else {
			held++
		}
		pending++
		if size >= setAsideBatchBytes {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	return res, flush()
}

// SetAsideResult is what SetAsideMany did.
type SetAsideResult struct {
	Done   int // messages of rs, from the first, the log now holds
	Copied int // bytes of the letters written
	Held   int // messages among Done the log already held, not copied again
}

// setAsideBatchBytes bounds the letters SetAsideMany holds in memory and
// writes with one fsync.
const setAsideBatchBytes = 4 << 20

// letter reads message r.ID back from the spool as its dead letter.
func (s *Spool) letter(r Refused, at time.Time) ([]byte, error) {
	it := s.seg.NewIterator(r.ID, 64<<10)
	if !it.Next() || it.Offset() != r.ID {
		err := it.Err()
		if err == nil {
			err = fmt.Errorf("message %d is not in the spool", r.ID)
		}
		return nil, fmt.Errorf("agent: set message %d aside: %w", r.ID, err)
	}
	return deadletter.Append(nil, deadletter.Letter{ID: r.ID, At: at, Code: r.Code, Detail: r.Detail, Record: it.Value()}), nil
}

// openDeadLettersOnce opens the dead-letter log for appending, once.
func (s *Spool) openDeadLettersOnce() error {
	if s.dead != nil {
		return nil
	}
	dead, err := s.openDeadLetters()
	if err != nil {
		return fmt.Errorf("agent: open the dead-letter log: %w", err)
	}
	s.dead = dead
	return nil
}

// openDeadLetters opens the dead-letter log for appending. A log damaged
// before its end (which seglog will not open) is moved aside whole, to
// dead-letter.damaged-UNIXNANO for `sluice log check --repair`, and a new
// one started: refusing to set messages aside would let the parked ones
// fill the spool again.
func (s *Spool) openDeadLetters() (*seglog.Log, error) {
	dir := filepath.Join(s.dir, deadletter.Dir)
	opts := append(append([]seglog.Option(nil), s.opts...), seglog.WithSegmentBytes(deadLetterSegmentBytes),
		seglog.WithSync(seglog.SyncAlways()), seglog.WithMaxRecordBytes(seglog.MaxRecordLimit))
	dead, err := seglog.Open(dir, opts...)
	var ce *seglog.CorruptionError
	if !errors.As(err, &ce) {
		return dead, err
	}
	aside := fmt.Sprintf("%s.damaged-%d", dir, time.Now().UnixNano())
	if rerr := os.Rename(dir, aside); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	s.logger.Error("agent: the dead-letter log is damaged; moved aside whole and a new one started (sluice log check --repair on it keeps its intact letters)",
		"damaged", aside, "segment", ce.File, "pos", ce.Pos, "reason", ce.Reason)
	// The new log holds none of them: a message among them set aside
	// again is copied into it.
	s.mu.Lock()
	clear(s.deadIDs)
	s.mu.Unlock()
	return seglog.Open(dir, opts...)
}

// DeadLetters is how many messages the dead-letter log holds, set aside
// by this run or an earlier one.
func (s *Spool) DeadLetters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.deadIDs)
}

// DeadLetterDir is the directory of the dead-letter log (see SetAside).
func (s *Spool) DeadLetterDir() string { return filepath.Join(s.dir, deadletter.Dir) }

// Release returns quota reserved for bytes that were never written.
func (s *Spool) Release(n int64) {
	s.mu.Lock()
	s.reserved -= n
	s.mu.Unlock()
}

// Settle replaces a reservation, made from uncompressed sizes before
// compression, with the bytes the spool record really took; otherwise a
// well-compressing stream would hit the quota long before the disk fills.
func (s *Spool) Settle(reserved, written int64) {
	s.mu.Lock()
	s.reserved -= reserved
	s.appended += written
	s.mu.Unlock()
}

// Records calls fn with each record of message m, spooled as message id
// by agent, in order. dec decodes the body (nil: a decoder of its own,
// which a ZstdDict body cannot use: it needs the dictionary added). rec
// aliases a buffer of Records': fn copies what it keeps.
func Records(m Record, agent string, id uint64, dec *codec.Decoder, fn func(rec []byte) error) error {
	if dec == nil {
		dec = codec.NewDecoder(defaults.MaxMessage)
	}
	body, err := dec.Decode(nil, m.Body, m.Kind, m.DictID)
	if err != nil {
		return fmt.Errorf("message %d: %w", id, err)
	}
	if m.Kind == codec.KafkaZstd {
		return kafkarec.Records(body, []byte(agent), id, int(m.Records), func(_ int, v []byte) error { return fn(v) })
	}
	return batch.Decode(body, fn)
}

// ReadAgentID returns the agent id of the spool in dir, without opening
// (or locking) it: for tools that read a spool beside a running agent.
func ReadAgentID(dir string) (string, error) {
	id, err := seglog.ReadMeta(dir, agentIDFile)
	if err != nil {
		return "", fmt.Errorf("spool %s: %w", dir, err)
	}
	return string(id), nil
}
