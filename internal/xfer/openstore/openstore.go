// Package openstore opens the store `sluice xfer serve` keeps uploads in,
// from its flags: a local directory (diskstore) or an S3 location
// (s3store), behind xfer.IDBackend. It is apart from the serve package
// because the stores' own tests run servers (serve), which would then
// import their store back.
package openstore

import (
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/s3store"
)

// Config says which store a server keeps its uploads in: a local
// directory (Dir), or else an S3 location (S3), with the same limits.
type Config struct {
	Dir     string
	S3      s3store.Location
	Options diskstore.Options
}

// Store is the store behind a server, opened from a Config.
type Store struct {
	Backend xfer.IDBackend
	// Where names it for logs: the directory, or the S3 URL.
	Where string
	// Disk is the local-disk store, nil for S3 (whose partial uploads any
	// server on the same store resumes, so none are this server's).
	Disk *diskstore.Uploads
	// Close releases it (the directory's lock, idle timers).
	Close func() error
	// Ready is for /readyz: nil when the store is ready (always, for S3).
	Ready func() error
}

// Open opens the directory store at c.Dir, or the S3 store at c.S3
// when Dir is "".
func Open(c Config) (*Store, error) {
	o := c.Options
	if c.Dir != "" {
		disk, err := diskstore.Open(c.Dir, o)
		if err != nil {
			return nil, err
		}
		return &Store{Backend: disk, Where: c.Dir, Disk: disk, Close: disk.Close, Ready: disk.Ready}, nil
	}
	client, err := s3store.Client(c.S3)
	if err != nil {
		return nil, err
	}
	s3, err := s3store.Open(c.S3, client, s3store.Options{MaxSize: o.MaxSize, Expire: o.Expire, IdleTimeout: o.IdleTimeout, Log: o.Log})
	if err != nil {
		return nil, err
	}
	return &Store{Backend: s3, Where: c.S3.String(), Close: s3.Close, Ready: func() error { return nil }}, nil
}

// Summary is the slog attributes of what a run did and what it leaves for
// the next server on this store: uploads completed and failed, bytes
// received, and (a directory) the partial uploads kept.
func (s *Store) Summary() []any {
	stats := s.Backend.Counters()
	attrs := []any{"uploads_completed", stats.UploadsCompleted.Load(),
		"uploads_failed", stats.UploadsFailed.Load(), "bytes_received", stats.BytesReceived.Load()}
	if s.Disk != nil {
		attrs = append(attrs, "partial_uploads_kept", s.Disk.Partials())
	}
	return attrs
}
