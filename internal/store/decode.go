package store

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
)

// maxDictDecoders bounds the per-agent dictionary decoders one
// BodyDecoder keeps.
const maxDictDecoders = 16

// BodyDecoder decompresses message bodies as agents sent them: one decoder
// for zstd without dictionary, one per agent for zstd_dict (dictionary ids
// are per agent), at most maxDictDecoders of those. Not safe for concurrent
// use.
type BodyDecoder struct {
	Dicts *Dicts
	zstd  *codec.Decoder
	byAg  map[string]*codec.Decoder
}

// decode returns the batch body of a message, appended to dst when it had
// to be decompressed, or body itself when it is plain.
func (d *BodyDecoder) Decode(dst []byte, agent string, c codec.Kind, dictID uint32, body []byte) ([]byte, error) {
	switch c {
	case codec.Plain:
		return body, nil
	case codec.Zstd:
		if d.zstd == nil {
			d.zstd = codec.NewDecoder(defaults.SinkMaxMessageLimit)
		}
		return d.zstd.Decode(dst, body, codec.Zstd, 0)
	case codec.ZstdDict:
		dec := d.byAg[agent]
		if dec == nil {
			if d.byAg == nil {
				d.byAg = make(map[string]*codec.Decoder)
			}
			if len(d.byAg) >= maxDictDecoders {
				for a := range d.byAg {
					delete(d.byAg, a)
					break
				}
			}
			dec = codec.NewDecoder(defaults.SinkMaxMessageLimit)
			d.byAg[agent] = dec
		}
		if !dec.HasDictionary(dictID) {
			dict, ok, err := d.Dicts.Get(agent, dictID)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("dictionary %d of agent %q is missing", dictID, agent)
			}
			if err := dec.AddDictionary(dict); err != nil {
				return nil, err
			}
		}
		return dec.Decode(dst, body, codec.ZstdDict, dictID)
	}
	return nil, fmt.Errorf("unknown codec %v", c)
}
