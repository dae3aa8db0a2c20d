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

// CopyVerified copies a chunk given in pieces (n bytes in all) into dst,
// the first n bytes of which it overwrites, and checks the CRC32C of the
// copy: a mismatch is counted in stats and answered ErrChecksum, and the
// caller keeps nothing of dst. It is VerifyPieces and the copy in one walk
// for a store that copies the chunk anyway (the disk store into its
// block). The order is why: the chunk's bytes are usually out of cache
// by the time a store takes them (a window of frames was read ahead of
// it), and the copy's loads stream out of memory about twice as fast as
// the CRC's do (11 against 6.7 GB/s here), while the CRC then reads the
// copy still in L1 at 20+ GB/s: the pair costs three quarters of the CRC
// followed by the copy (docs/benchmarks.md, "Issue 27: the chunk checksum
// where the bytes are warm"). The copy goes in steps of copyStep so that
// what the CRC reads is in L1.
func CopyVerified(stats *Stats, off int64, dst []byte, pieces [][]byte, n int, crc uint32) error {
	var sum uint32
	at := 0
	for _, p := range pieces {
		for len(p) > 0 {
			step := p[:min(len(p), copyStep)]
			d := dst[at : at+len(step)]
			copy(d, step)
			sum = crc32.Update(sum, castagnoli, d)
			at += len(step)
			p = p[len(step):]
		}
	}
	if sum == crc {
		return nil
	}
	return refuseChunk(stats, off, n)
}

// copyStep is how much CopyVerified copies before it checksums what it
// copied: within L1 (48 KiB of data here), so the CRC reads it there.
const copyStep = 32 << 10

func refuseChunk(stats *Stats, off int64, n int) error {
	stats.ChunksRejected.Add(1)
	return fmt.Errorf("%w: CRC32C of the %d-byte chunk at offset %d", ErrChecksum, n, off)
}
