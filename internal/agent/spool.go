package agent

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/dirlock"
	"github.com/sluicehq/sluice/seglog"
)

// A spooled message is one seglog record:
//
//	0  uint8   spool record version (1)
//	1  uint8   codec kind (codec.Plain, codec.Zstd, codec.ZstdDict)
//	2  uint32  dictionary id (0 unless ZstdDict)
//	6  uint32  number of records in the body
//	10 uint16  number of producer marks, then per mark:
//	           uint8 length, producer id, uint64 sequence,
//	           uint32 records of the request spooled up to here,
//	           uint8 1 if that is the whole request
//	.. body    the message as it goes on the wire (internal/batch, compressed)
//
// The message id on the wire is the record's offset in the spool. A mark is
// stored in every message holding records of a producer's request, so the
// progress of each request is durable exactly when its records are: after a
// crash in the middle of a request split over several messages, a retry
// spools only the records that are missing. This is what makes ingest
// retries exact.
const (
	markTail          = 8 + 4 + 1 // seq, done, complete
	spoolVersion      = 1
	spoolFixedHeader  = 12
	maxProducerIDLen  = 64
	maxMarksPerRecord = 1 << 16
)

// mark records how far request seq of producer is spooled.
type mark struct {
	producer string
	seq      uint64
	done     uint32 // records of the request spooled, this message included
	complete bool   // done is the whole request
}

// progress is the newest request of a producer and how far it got.
type progress struct {
	seq      uint64
	done     uint32
	complete bool
}

// after reports whether m is further along than p.
func (p progress) before(m mark) bool {
	return m.seq > p.seq || (m.seq == p.seq && (m.done > p.done || (m.complete && !p.complete)))
}

// spooled is a decoded spool record; Body aliases the buffer it came from.
type spooled struct {
	Kind    codec.Kind
	DictID  uint32
	Records uint32
	Marks   []mark
	Body    []byte
}

// appendSpooledHeader appends everything but the body.
func appendSpooledHeader(dst []byte, m spooled) []byte {
	dst = append(dst, spoolVersion, byte(m.Kind))
	dst = binary.LittleEndian.AppendUint32(dst, m.DictID)
	dst = binary.LittleEndian.AppendUint32(dst, m.Records)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(m.Marks)))
	for _, mk := range m.Marks {
		dst = append(dst, byte(len(mk.producer)))
		dst = append(dst, mk.producer...)
		dst = binary.LittleEndian.AppendUint64(dst, mk.seq)
		dst = binary.LittleEndian.AppendUint32(dst, mk.done)
		dst = append(dst, boolByte(mk.complete))
	}
	return dst
}

func appendSpooled(dst []byte, m spooled) []byte {
	return append(appendSpooledHeader(dst, m), m.Body...)
}

var errBadSpoolRecord = errors.New("agent: malformed spool record")

func decodeSpooled(b []byte) (spooled, error) {
	if len(b) < spoolFixedHeader {
		return spooled{}, fmt.Errorf("%w: %d bytes, header needs %d", errBadSpoolRecord, len(b), spoolFixedHeader)
	}
	if b[0] != spoolVersion {
		return spooled{}, fmt.Errorf("%w: version %d", errBadSpoolRecord, b[0])
	}
	k := codec.Kind(b[1])
	if k != codec.Plain && k != codec.Zstd && k != codec.ZstdDict {
		return spooled{}, fmt.Errorf("%w: codec %d", errBadSpoolRecord, b[1])
	}
	m := spooled{Kind: k, DictID: binary.LittleEndian.Uint32(b[2:6]), Records: binary.LittleEndian.Uint32(b[6:10])}
	if (k == codec.ZstdDict) != (m.DictID != 0) {
		return spooled{}, fmt.Errorf("%w: codec %v with dictionary id %d", errBadSpoolRecord, k, m.DictID)
	}
	n := int(binary.LittleEndian.Uint16(b[10:12]))
	p := spoolFixedHeader
	for i := 0; i < n; i++ {
		if p >= len(b) {
			return spooled{}, fmt.Errorf("%w: mark %d cut short", errBadSpoolRecord, i)
		}
		l := int(b[p])
		if l == 0 || l > maxProducerIDLen || p+1+l+markTail > len(b) {
			return spooled{}, fmt.Errorf("%w: mark %d: producer id of %d bytes at %d", errBadSpoolRecord, i, l, p)
		}
		t := b[p+1+l:]
		if t[12] > 1 {
			return spooled{}, fmt.Errorf("%w: mark %d: complete flag %d", errBadSpoolRecord, i, t[12])
		}
		m.Marks = append(m.Marks, mark{producer: string(b[p+1 : p+1+l]), seq: binary.LittleEndian.Uint64(t),
			done: binary.LittleEndian.Uint32(t[8:]), complete: t[12] == 1})
		p += 1 + l + markTail
	}
	m.Body = b[p:]
	return m, nil
}

// spool is the agent's durable queue: a seglog of messages, the agent's
// stable id, and the acknowledged watermark.
type spool struct {
	dir    string
	logger *slog.Logger
	lock   *dirlock.Lock
	log    *seglog.Log
	id     string
	quota  int64

	mu        sync.Mutex
	watermark uint64 // every id below is acknowledged (persisted)
	// producers maps a producer id to the progress of its newest request
	// (see mark).
	producers map[string]progress
	// warnings are what openSpool had to work around, for New to log.
	warnings  []string
	diskBytes int64 // segment bytes on disk, refreshed after removals
	appended  int64 // bytes appended since diskBytes was measured
	reserved  int64 // quota reserved by ingest calls not yet spooled
	// noSpace is the last append's ENOSPC/EDQUOT error, cleared by the
	// next successful append; broken is a failed fdatasync, which only a
	// restart clears (seglog.ErrBroken).
	noSpace, broken error
}

const (
	agentIDFile = "agent-id"
	// stateFile holds the acknowledged watermark and the producer table,
	// written together so they never disagree.
	stateFile = "delivery-state"
)

func openSpool(dir string, quota int64, wantID string, logger *slog.Logger, opts ...seglog.Option) (sp *spool, err error) {
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
	s := &spool{dir: dir, quota: quota, lock: lock, logger: logger}
	id, err := seglog.ReadMeta(dir, agentIDFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		id = []byte(wantID)
		if wantID == "" {
			var b [12]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, err
			}
			id = []byte("agent-" + hex.EncodeToString(b[:]))
		}
		if err := seglog.WriteMeta(dir, agentIDFile, id); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("agent: spool %s: %w", dir, err)
	case wantID != "" && string(id) != wantID:
		// The sink deduplicates by (agent id, message id): under a new id
		// every unacknowledged message would be stored again, and message
		// ids restart their meaning.
		return nil, fmt.Errorf("agent: spool %s belongs to agent id %q, not %q: changing an agent's identity breaks deduplication at the sink; use a new spool directory for a new id, or drop the agent id setting to keep %q",
			dir, id, wantID, id)
	}
	s.id = string(id)
	state, err := seglog.ReadMeta(dir, stateFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.producers = map[string]progress{}
	case err != nil:
		return nil, fmt.Errorf("agent: spool %s: %w", dir, err)
	default:
		if s.watermark, s.producers, err = decodeState(state); err != nil {
			return nil, fmt.Errorf("agent: spool %s: %s: %w", dir, stateFile, err)
		}
	}
	logDir := filepath.Join(dir, "log")
	s.log, err = seglog.Open(logDir, opts...)
	if err != nil {
		var ce *seglog.CorruptionError
		if errors.As(err, &ce) {
			abs, aerr := filepath.Abs(logDir)
			if aerr != nil {
				abs = logDir
			}
			return nil, fmt.Errorf("agent: spool %s is damaged: segment %s, byte %d: %s.\nStop here and run\n\tsluice log check --repair %s\nwhich moves the damage to %s and keeps every readable record; then start the agent again (records acknowledged by the sink are not needed again)",
				dir, ce.File, ce.Pos, ce.Reason, abs, filepath.Join(abs, "quarantine"))
		}
		return nil, err
	}
	if next := s.log.NextOffset(); s.watermark > next {
		// The log lost records the sink had acknowledged (a repair cut it
		// short). Never reuse their ids: the sink would take new messages
		// under them for duplicates. Move the log forward instead.
		if _, err := s.log.RemoveBefore(s.watermark); err != nil {
			s.log.Close()
			return nil, fmt.Errorf("agent: spool %s: move the log from %d to the acknowledged watermark %d: %w", dir, next, s.watermark, err)
		}
		s.warnings = append(s.warnings, fmt.Sprintf("acknowledged watermark %d is beyond the log's end %d (a repair removed acknowledged records); new messages start at %d", s.watermark, next, s.watermark))
	}
	if first := s.log.FirstOffset(); s.watermark < first {
		// Gone before their ack was persisted: removed after their ack
		// when the disk was too full to write the state file, or lost.
		s.warnings = append(s.warnings, fmt.Sprintf("messages %d to %d are not in the spool (the log starts at %d); unless they were acknowledged while the disk was full, they are lost", s.watermark, first-1, first))
		s.watermark = first
	}
	s.measure()
	return s, nil
}

// measure recomputes the spool's size on disk.
func (s *spool) measure() {
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

// reserve checks the quota for n more bytes and counts them. When they do
// not fit it first frees what is acknowledged: RemoveBefore may have left
// the active segment in place while an append was running.
func (s *spool) reserve(n int64) bool {
	if s.tryReserve(n) {
		return true
	}
	s.reclaim()
	return s.tryReserve(n)
}

func (s *spool) tryReserve(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.quota > 0 && s.diskBytes+s.appended+s.reserved+n > s.quota {
		return false
	}
	s.reserved += n
	return true
}

// reclaim removes acknowledged segments.
func (s *spool) reclaim() {
	n, err := s.log.RemoveBefore(s.ackedWatermark())
	if n > 0 {
		s.measure()
	}
	if err != nil && !errors.Is(err, seglog.ErrClosed) {
		s.logger.Warn("agent: freeing acknowledged spool segments failed", "err", err)
	}
}

func (s *spool) size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.diskBytes + s.appended + s.reserved
}

// acknowledge persists a new watermark, with the producer table as it is
// now (every entry in it is durably spooled, so it is safe to persist), and
// then deletes segments below the watermark. When the disk is full the
// segments are deleted even though the state file could not be written:
// the sink has them, so the only cost is a warning at the next start, and
// it is what frees the disk the spool itself filled. The caller retries
// the state file.
func (s *spool) acknowledge(w uint64) error {
	s.mu.Lock()
	if w <= s.watermark {
		s.mu.Unlock()
		return nil
	}
	state := encodeState(w, s.producers)
	s.mu.Unlock()
	if err := seglog.WriteMeta(s.dir, stateFile, state); err != nil {
		if isNoSpace(err) {
			if n, _ := s.log.RemoveBefore(w); n > 0 {
				s.measure()
			}
		}
		return err
	}
	s.mu.Lock()
	s.watermark = w
	s.mu.Unlock()
	upTo := w
	if s.quota > 0 && s.size() < s.quota/2 && w > 0 {
		// Far from the quota, keep the active segment even when all of it
		// is acknowledged: with a trickle of records, replacing it on every
		// ack would create and delete a file every 100 ms. Sealed segments
		// go as usual; under quota pressure reclaim replaces it.
		upTo = w - 1
	}
	n, err := s.log.RemoveBefore(upTo)
	if n > 0 {
		s.measure()
	}
	return err
}

// isNoSpace reports whether err is the disk (or the user's disk quota)
// being full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// appendDone records the outcome of an append for SpoolWritable.
func (s *spool) appendDone(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.noSpace = nil
	case isNoSpace(err):
		s.noSpace = err
	case errors.Is(err, seglog.ErrBroken):
		s.broken = err
	}
}

// writable is nil when an append can be expected to succeed.
func (s *spool) writable(headroom int64) error {
	s.mu.Lock()
	broken, noSpace := s.broken, s.noSpace
	s.mu.Unlock()
	if broken != nil {
		return fmt.Errorf("spool %s cannot be written until the agent restarts: %w", s.dir, broken)
	}
	if noSpace != nil {
		// Ready again once the disk has room for a few messages, so a
		// readiness probe does not keep traffic away forever.
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Join(s.dir, "log"), &st); err != nil || int64(st.Bavail)*int64(st.Bsize) < 4*headroom {
			return fmt.Errorf("%w: %v", ErrNoSpace, noSpace)
		}
	}
	if s.quota > 0 && s.size()+headroom > s.quota {
		s.reclaim()
		if sz := s.size(); sz+headroom > s.quota {
			return fmt.Errorf("%w (%d bytes on disk, quota %d)", ErrSpoolFull, sz, s.quota)
		}
	}
	return nil
}

// progressOf is the progress of producer's newest request.
func (s *spool) progressOf(producer string) progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.producers[producer]
}

// completed records spooled marks.
func (s *spool) completed(marks []mark) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range marks {
		if p := s.producers[m.producer]; p.before(m) {
			s.producers[m.producer] = progress{seq: m.seq, done: m.done, complete: m.complete}
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
			if q.seq < low {
				victim, low = p, q.seq
			}
		}
		delete(s.producers, victim)
	}
}

const maxProducers = 100_000

func encodeState(w uint64, producers map[string]progress) []byte {
	b := binary.LittleEndian.AppendUint64(nil, w)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(producers)))
	for p, q := range producers {
		b = append(b, byte(len(p)))
		b = append(b, p...)
		b = binary.LittleEndian.AppendUint64(b, q.seq)
		b = binary.LittleEndian.AppendUint32(b, q.done)
		b = append(b, boolByte(q.complete))
	}
	return b
}

func decodeState(b []byte) (uint64, map[string]progress, error) {
	if len(b) < 12 {
		return 0, nil, fmt.Errorf("%d bytes, want at least 12", len(b))
	}
	w := binary.LittleEndian.Uint64(b)
	n := int(binary.LittleEndian.Uint32(b[8:]))
	producers := make(map[string]progress, min(n, maxProducers))
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
		producers[string(b[p+1:p+1+l])] = progress{seq: binary.LittleEndian.Uint64(t),
			done: binary.LittleEndian.Uint32(t[8:]), complete: t[12] == 1}
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

func (s *spool) ackedWatermark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watermark
}

func (s *spool) close() error {
	err := s.log.Close()
	s.lock.Release()
	return err
}

// release returns quota reserved for bytes that were never written.
func (s *spool) release(n int64) {
	s.mu.Lock()
	s.reserved -= n
	s.mu.Unlock()
}

// settle replaces a reservation, made from uncompressed sizes before
// compression, with the bytes the spool record really took; otherwise a
// well-compressing stream would hit the quota long before the disk fills.
func (s *spool) settle(reserved, written int64) {
	s.mu.Lock()
	s.reserved -= reserved
	s.appended += written
	s.mu.Unlock()
}
