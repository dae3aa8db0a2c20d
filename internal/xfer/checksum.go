package xfer

import "hash/crc32"

// MaxChunk is the largest chunk a client sends; every transport's message
// limit is set above it.
const MaxChunk = 8 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C is the Castagnoli CRC of p, the per-chunk check of every transport.
func CRC32C(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }
