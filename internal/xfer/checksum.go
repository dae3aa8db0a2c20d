package xfer

import (
	"fmt"
	"hash/crc32"
)

// MaxChunk is the largest chunk a client sends; every transport's message
// limit is set above it.
const MaxChunk = 8 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the Castagnoli CRC of p, the per-chunk check of every transport.
func CRC32C(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// VerifyChunk checks that p, the chunk a store is given at offset off,
// has the CRC32C crc its sender computed; a mismatch is counted in stats
// and answered ErrChecksum, and the store writes nothing of it.
func VerifyChunk(stats *Stats, off int64, p []byte, crc uint32) error {
	if CRC32C(p) == crc {
		return nil
	}
	return refuseChunk(stats, off, len(p))
}

// VerifyPieces is VerifyChunk for a chunk given in pieces (see
// PieceWriter), the CRC32C running across them; n is their length.
func VerifyPieces(stats *Stats, off int64, pieces [][]byte, n int, crc uint32) error {
	var sum uint32
	for _, p := range pieces {
		sum = crc32.Update(sum, castagnoli, p)
	}
	if sum == crc {
		return nil
	}
	return refuseChunk(stats, off, n)
}

func refuseChunk(stats *Stats, off int64, n int) error {
	stats.ChunksRejected.Add(1)
	return fmt.Errorf("%w: CRC32C of the %d-byte chunk at offset %d", ErrChecksum, n, off)
}
