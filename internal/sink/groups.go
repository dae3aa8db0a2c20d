package sink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/sluicehq/sluice/seglog"
)

// maxGroupName is the longest consumer group name, in bytes.
const maxGroupName = 255

// groupStore keeps each consumer group's committed offset in dir/GROUP
// (GROUP escaped by fileName), a seglog metadata file holding the offset
// as a little-endian uint64. Commits are serialized: each is a write,
// fdatasync, rename and directory fsync. Safe for concurrent use.
type groupStore struct {
	dir string
	mu  sync.Mutex
}

func validGroup(name string) error {
	if name == "" || len(name) > maxGroupName {
		return fmt.Errorf("group name of %d bytes: want 1 to %d", len(name), maxGroupName)
	}
	return nil
}

// get returns the group's committed offset; ok is false if it has none.
func (g *groupStore) get(group string) (off uint64, ok bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, err := seglog.ReadMeta(g.dir, fileName(group))
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
	return seglog.WriteMeta(g.dir, fileName(group), binary.LittleEndian.AppendUint64(nil, off))
}
