package kafkarec

import (
	"encoding/binary"
	"testing"

	"github.com/sluicehq/sluice/internal/defaults"
)

func TestParseHeaderValue(t *testing.T) {
	v := AppendHeaderValue(nil, RecordHeaders{Agent: []byte("a"), Message: 5, Index: 0, Count: 1})
	if want := []byte{1, 5, 0, 1, 'a'}; string(v) != string(want) {
		t.Fatalf("encoded %v, want %v", v, want)
	}
	for name, bad := range map[string][]byte{
		"empty":              nil,
		"version 2":          {2, 5, 0, 1, 'a'},
		"no agent":           {1, 5, 0, 1},
		"index = count":      {1, 5, 1, 1, 'a'},
		"count 0":            {1, 5, 0, 0, 'a'},
		"non-minimal varint": {1, 0x85, 0, 0, 1, 'a'},
		"truncated varint":   {1, 0x85},
		"count over 32 bits": append(binary.AppendUvarint([]byte{1, 5, 0}, 1<<32), 'a'),
		"agent too long":     append([]byte{1, 5, 0, 1}, make([]byte, defaults.MaxAgentIDLen+1)...),
	} {
		if h, ok := ParseHeaderValue(bad); ok {
			t.Errorf("%s: accepted as %+v", name, h)
		}
	}
}

// FuzzParseHeaderValue: the value of a HeaderSluice header comes from
// whoever writes to the topic. Any bytes parse or are refused, never a
// panic; what parses is consistent (a non-empty agent within the limit,
// index below count) and canonical (it encodes back to the same bytes).
func FuzzParseHeaderValue(f *testing.F) {
	f.Add(AppendHeaderValue(nil, RecordHeaders{Agent: []byte("edge-1"), Message: 42, Index: 0, Count: 1}))
	f.Add(AppendHeaderValue(nil, RecordHeaders{Agent: []byte("a"), Message: 1<<64 - 1, Index: 1<<32 - 2, Count: 1<<32 - 1}))
	f.Add([]byte{1, 0x85, 0, 0, 1, 'a'})
	f.Add([]byte{2, 5, 0, 1, 'a'})
	f.Fuzz(func(t *testing.T, v []byte) {
		h, ok := ParseHeaderValue(v)
		if !ok {
			return
		}
		if len(h.Agent) == 0 || len(h.Agent) > defaults.MaxAgentIDLen || h.Index >= h.Count {
			t.Fatalf("accepted an inconsistent value %x → %+v", v, h)
		}
		if again := AppendHeaderValue(nil, h); string(again) != string(v) {
			t.Fatalf("accepted a non-canonical value %x (encodes back to %x)", v, again)
		}
	})
}
