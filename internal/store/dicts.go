package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/seglog"
)

// maxDictsPerAgent bounds how many dictionaries one agent may upload: each
// is kept forever, because stored messages need it to be read back.
const maxDictsPerAgent = 1024

const dictSuffix = ".zdict"

// Dicts keeps the dictionaries agents uploaded, durably, in
// dir/AGENT/ID.zdict (AGENT escaped by fileName; each file a seglog
// metadata file), and caches those used since startup. Safe for
// concurrent use.
type Dicts struct {
	dir string
	mu  sync.Mutex
	// cache holds the dictionaries loaded or stored since startup.
	cache map[string]map[uint32]codec.Dictionary
}

func NewDicts(dir string) *Dicts {
	return &Dicts{dir: dir, cache: make(map[string]map[uint32]codec.Dictionary)}
}

func (d *Dicts) agentDir(agent string) string { return filepath.Join(d.dir, FileName(agent)) }

// get returns agent's dictionary id; ok is false if the agent never
// uploaded it.
func (d *Dicts) Get(agent string, id uint32) (dict codec.Dictionary, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.getLocked(agent, id)
}

func (d *Dicts) getLocked(agent string, id uint32) (codec.Dictionary, bool, error) {
	if dict, ok := d.cache[agent][id]; ok {
		return dict, true, nil
	}
	data, err := seglog.ReadMeta(d.agentDir(agent), strconv.FormatUint(uint64(id), 10)+dictSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return codec.Dictionary{}, false, nil
	}
	if err != nil {
		return codec.Dictionary{}, false, err
	}
	dict, err := codec.ParseDictionary(data)
	if err != nil {
		return codec.Dictionary{}, false, fmt.Errorf("stored dictionary %d of agent %q: %w", id, agent, err)
	}
	if dict.ID != id {
		return codec.Dictionary{}, false, fmt.Errorf("stored dictionary %d of agent %q has id %d in its header", id, agent, dict.ID)
	}
	d.remember(agent, dict)
	return dict, true, nil
}

func (d *Dicts) remember(agent string, dict codec.Dictionary) {
	m := d.cache[agent]
	if m == nil {
		m = make(map[uint32]codec.Dictionary)
		d.cache[agent] = m
	}
	m[dict.ID] = dict
}

// has reports which of ids the agent has uploaded.
func (d *Dicts) Has(agent string, ids []uint32) ([]uint32, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	known, err := d.list(agent)
	if err != nil {
		return nil, err
	}
	var out []uint32
	for _, id := range ids {
		if _, ok := known[id]; ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// list returns the ids of the agent's stored dictionaries.
func (d *Dicts) list(agent string) (map[uint32]struct{}, error) {
	entries, err := os.ReadDir(d.agentDir(agent))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := make(map[uint32]struct{}, len(entries))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), dictSuffix)
		if !ok {
			continue
		}
		if id, err := strconv.ParseUint(name, 10, 32); err == nil && id != 0 {
			ids[uint32(id)] = struct{}{}
		}
	}
	return ids, nil
}

// ErrDictConflict: the agent uploaded different bytes under an id it used
// before. It is the codec's error for the same condition, so one
// errors.Is covers the store's check and the decoder's.
var ErrDictConflict = codec.ErrDictionaryConflict

// ErrTooManyDicts: the agent reached maxDictsPerAgent.
var ErrTooManyDicts = fmt.Errorf("more than %d dictionaries", maxDictsPerAgent)

// put stores dict for agent durably. Storing the same dictionary again is
// a no-op; different bytes under a known id fail with ErrDictConflict.
func (d *Dicts) Put(agent string, dict codec.Dictionary) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	have, ok, err := d.getLocked(agent, dict.ID)
	if err != nil {
		return err
	}
	if ok {
		if !bytes.Equal(have.Data, dict.Data) {
			return fmt.Errorf("%w: id %d", ErrDictConflict, dict.ID)
		}
		return nil
	}
	known, err := d.list(agent)
	if err != nil {
		return err
	}
	if len(known) >= maxDictsPerAgent {
		return ErrTooManyDicts
	}
	dir := d.agentDir(agent)
	if err := MkdirDurable(dir); err != nil {
		return err
	}
	if err := seglog.WriteMeta(dir, strconv.FormatUint(uint64(dict.ID), 10)+dictSuffix, dict.Data); err != nil {
		return err
	}
	d.remember(agent, dict)
	return nil
}
