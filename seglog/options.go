package seglog

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// SyncPolicy says when appended records are forced to stable storage.
type SyncPolicy struct {
	mode     syncMode
	interval time.Duration
}

type syncMode uint8

const (
	syncAlways syncMode = iota
	syncInterval
	syncNone
)

// SyncAlways makes Append return only after the records were fdatasync'ed.
// Concurrent appends share one fdatasync (group commit). This is the default.
func SyncAlways() SyncPolicy { return SyncPolicy{mode: syncAlways} }

// SyncInterval makes Append return once the records are handed to the OS,
// and fdatasyncs in the background every d: a process crash loses nothing, a
// power failure can lose the last d of appends.
func SyncInterval(d time.Duration) SyncPolicy { return SyncPolicy{mode: syncInterval, interval: d} }

// SyncNone fdatasyncs only when a segment is sealed, on Sync, and when the
// log is closed. Unsafe on power failure; meant for benchmarks and data
// that can be regenerated.
func SyncNone() SyncPolicy { return SyncPolicy{mode: syncNone} }

func (p SyncPolicy) String() string {
	switch p.mode {
	case syncAlways:
		return "always"
	case syncInterval:
		return "interval(" + p.interval.String() + ")"
	default:
		return "none"
	}
}

// ParseSyncPolicy parses "always", "none" or a Go duration such as "10ms"
// (SyncInterval).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "always", "":
		return SyncAlways(), nil
	case "none":
		return SyncNone(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return SyncPolicy{}, fmt.Errorf("seglog: sync policy %q: want always, none or a positive duration", s)
	}
	return SyncInterval(d), nil
}

// Option configures a Log.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	segmentBytes   int64
	indexInterval  int64
	maxRecordBytes int
	sync           SyncPolicy
	trustSealed    bool
	logger         *slog.Logger
	slowSync       time.Duration
	onSync         func(time.Duration)
	fs             FS
	visit          func(offset uint64, body []byte)
	reserveStep    uint64
}

func defaultConfig() config {
	return config{
		segmentBytes:   64 << 20,
		indexInterval:  4 << 10,
		maxRecordBytes: 32 << 20,
		sync:           SyncAlways(),
		logger:         slog.Default(),
		slowSync:       time.Second,
		fs:             osFS{},
	}
}

func (c *config) validate() error {
	var errs []error
	if c.segmentBytes < 4<<10 || c.segmentBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("segment size %d outside [4 KiB, 1 GiB]", c.segmentBytes))
	}
	if c.indexInterval < 64 {
		errs = append(errs, fmt.Errorf("index interval %d below 64 bytes", c.indexInterval))
	}
	if c.maxRecordBytes < 1 || c.maxRecordBytes > MaxRecordLimit {
		errs = append(errs, fmt.Errorf("max record size %d outside [1, %d]", c.maxRecordBytes, MaxRecordLimit))
	}
	if c.sync.mode == syncInterval && c.sync.interval <= 0 {
		errs = append(errs, errors.New("sync interval must be positive"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("seglog: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// WithSegmentBytes sets the size at which a segment is sealed and a new one
// begins. Default 64 MiB. Smaller segments let the spool free space sooner;
// larger ones mean fewer files.
func WithSegmentBytes(n int64) Option { return optionFunc(func(c *config) { c.segmentBytes = n }) }

// WithIndexInterval sets how many bytes of records lie between two entries of
// the sparse index. Default 4 KiB: a read from an arbitrary offset scans at
// most that much before reaching it.
func WithIndexInterval(n int64) Option { return optionFunc(func(c *config) { c.indexInterval = n }) }

// WithMaxRecordBytes bounds the size of one record body. Default 32 MiB;
// larger appends fail with ErrRecordTooLarge. It also bounds what recovery
// believes a length field, so keep it no larger than needed.
func WithMaxRecordBytes(n int) Option { return optionFunc(func(c *config) { c.maxRecordBytes = n }) }

// WithSync sets the durability policy. Default SyncAlways.
func WithSync(p SyncPolicy) Option { return optionFunc(func(c *config) { c.sync = p }) }

// WithTrustSealedSegments skips checksum verification of sealed segments
// whose index trailer matches at Open; reads still verify every record they
// return. Default off: Open verifies every record of every segment, which
// costs one sequential read of the log.
func WithTrustSealedSegments() Option { return optionFunc(func(c *config) { c.trustSealed = true }) }

// WithCheckVisitor makes Check and Repair call visit with each intact
// data record they find (body aliases a buffer reused afterwards), so a
// caller can look inside the records the check reads anyway, e.g. to count
// what they hold. Offsets increase during one pass; a read-only check that
// starts over (a segment removed under it by a running process) visits
// again from its first record, at an offset no higher than the last seen.
// Open ignores it.
func WithCheckVisitor(visit func(offset uint64, body []byte)) Option {
	return optionFunc(func(c *config) { c.visit = visit })
}

// WithLogger sets where recovery reports and slow syncs are logged. Default
// slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.logger = l }) }

// WithSyncObserver registers a function called with the duration of every
// fdatasync (for a latency histogram). It runs on the appending goroutine and
// must be fast. Syncs slower than one second are also logged as warnings.
func WithSyncObserver(f func(time.Duration)) Option {
	return optionFunc(func(c *config) { c.onSync = f })
}

// WithFS replaces the filesystem the log (and Check and Repair) use.
// Default OSFS(). Every call of the log goes through fs, so the appends
// cost one interface call per write as with the default.
func WithFS(fs FS) Option { return optionFunc(func(c *config) { c.fs = fs }) }

// WithOffsetReservation makes the log never give an offset twice, even
// when a machine crash under SyncInterval or SyncNone loses records whose
// offsets were already handed out: before it publishes an offset at or
// above its reservation it persists a new one step offsets further on (a
// small fsynced file, ReservationFile, once per step), and Open skips to
// the reservation, behind a gap frame, when the log ends before it (see
// SkippedAtOpen). A clean Close syncs and lowers the reservation to the
// end of the log, so a clean restart skips nothing. Under
// SyncAlways nothing is reserved, but a reservation left by an earlier
// run is honoured. Default off (step 0).
func WithOffsetReservation(step uint64) Option {
	return optionFunc(func(c *config) { c.reserveStep = step })
}
