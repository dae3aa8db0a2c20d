package bench

import (
	"github.com/sluicehq/sluice/internal/codec"
)

// Pregenerate draws batches from src until they hold at least bytes of
// records, copied so that they stay valid: benchmarks make their data
// before the clock starts, so the generator does not compete for CPU with
// what is measured.
func Pregenerate(src Source, bytes int64) (batches [][][]byte, raw int64) {
	var scratch [][]byte
	for raw < bytes {
		scratch = src(scratch[:0])
		batches = append(batches, copyBatch(scratch))
		for _, r := range scratch {
			raw += int64(len(r))
		}
	}
	return batches, raw
}

// CompareDictionary compresses each body with plain zstd and with d, and
// returns both compression ratios (uncompressed over compressed bytes).
func CompareDictionary(d codec.Dictionary, bodies [][]byte) (zstd, dict float64, err error) {
	enc := codec.NewEncoder(codec.LevelDefault)
	if err := enc.AddDictionary(d); err != nil {
		return 0, 0, err
	}
	var raw, z, zd int
	var buf []byte
	for _, b := range bodies {
		raw += len(b)
		if buf, err = enc.Encode(buf[:0], b, codec.Zstd, 0); err != nil {
			return 0, 0, err
		}
		z += len(buf)
		if buf, err = enc.Encode(buf[:0], b, codec.ZstdDict, d.ID); err != nil {
			return 0, 0, err
		}
		zd += len(buf)
	}
	if z == 0 || zd == 0 {
		return 0, 0, nil
	}
	return float64(raw) / float64(z), float64(raw) / float64(zd), nil
}
