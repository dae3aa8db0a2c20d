package seglogstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/seglog"
)

// groupStore keeps each consumer group's committed offset in dir/GROUP
// (GROUP escaped by fileName), a seglog metadata file holding the offset
// as a little-endian uint64. Commits are serialized: each is a write,
// fdatasync, rename and directory fsync. Safe for concurrent use.
type groupStore struct {
	dir string
	mu  sync.Mutex
}

// get returns the group's committed offset; ok is false if it has none.
func (g *groupStore) get(group string) (off uint64, ok bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, err := seglog.ReadMeta(g.dir, store.FileName(group))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(b) != 8 {
		return 0, false, fmt.Errorf("offset file of group %q holds %d bytes, want 8", group, len(b))
	}
	return binary.LittleEndian.Uint64(b), true, nil
}

// commit durably records off as the group's committed offset.
func (g *groupStore) commit(group string, off uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return seglog.WriteMeta(g.dir, store.FileName(group), binary.LittleEndian.AppendUint64(nil, off))
}

// Committed is group's committed position (store.Reader).
func (e *Store) Committed(group string) (uint64, bool, error) { return e.groups.get(group) }

// Commit durably records pos as group's position (store.Reader).
func (e *Store) Commit(group string, pos uint64) error { return e.groups.commit(group, pos) }

func (e *Store) FirstOffset() uint64                { return e.log.FirstOffset() }
func (e *Store) NextOffset() uint64                 { return e.log.NextOffset() }
func (e *Store) Wait(offset uint64) <-chan struct{} { return e.log.Wait(offset) }

// NewIterator reads the log from offset from (store.Reader).
func (e *Store) NewIterator(from uint64, chunk int) store.Iterator {
	return &iterator{e.log.NewIterator(from, chunk)}
}

// iterator maps seglog's errors to the store's.
type iterator struct{ *seglog.Iterator }

func (it *iterator) Err() error {
	err := it.Iterator.Err()
	switch {
	case errors.Is(err, seglog.ErrTruncated):
		return fmt.Errorf("%w: %w", store.ErrTruncated, err)
	case errors.Is(err, seglog.ErrClosed):
		return fmt.Errorf("%w: %w", store.ErrClosed, err)
	}
	return err
}
