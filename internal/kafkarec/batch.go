package kafkarec

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// BatchHeaderLen is the length of a v2 record batch's header: what
// AppendBatch puts in front of the compressed records section.
const BatchHeaderLen = 61

// Offsets in the batch header of the fields AppendBatch computes.
const (
	batchLengthAt = 8  // after baseOffset
	crcAt         = 17 // after batchLength, partitionLeaderEpoch, magic
	attributesAt  = 21 // the CRC covers from here to the end
)

// codecZstd is the compression codec in a batch's attributes (low 3 bits).
const codecZstd = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is what a producer chooses of a record batch's header; the
// rest follows from the records and the compressed bytes.
type BatchHeader struct {
	// Records is the number of records in the records section, 1 or more
	// (Kafka refuses an empty batch).
	Records int
	// Timestamp is every record's timestamp, in milliseconds since the
	// epoch: the batch's base and max timestamp (AppendRecords' records
	// have timestampDelta 0).
	Timestamp int64
	// ProducerID, ProducerEpoch and BaseSequence are the idempotent
	// producer's; -1, -1, -1 for a producer that is not idempotent.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
}

// AppendBatch appends to dst a Kafka v2 record batch: the header for h
// (base offset 0 and partition leader epoch -1, as a producer sends them;
// the broker assigns both; attributes: zstd, create time, neither
// transactional nor control), followed by compressed, a zstd frame of a
// records section (AppendRecords') of h.Records records, untouched. The
// batch length and the CRC-32C cover compressed. It is an error if
// h.Records is below 1 or the batch would not fit Kafka's int32 length.
func AppendBatch(dst []byte, h BatchHeader, compressed []byte) ([]byte, error) {
	if len(compressed) > math.MaxInt32-(BatchHeaderLen-batchLengthAt-4) {
		return dst, fmt.Errorf("kafkarec: %d compressed bytes exceed a record batch's int32 length", len(compressed))
	}
	start := len(dst)
	dst, err := AppendBatchHeader(dst, h)
	if err != nil {
		return dst, err
	}
	dst = append(dst, compressed...)
	SealBatch(dst[start:])
	return dst, nil
}

// AppendBatchHeader appends the header AppendBatch writes, with the batch
// length and the CRC left at zero, for a caller that compresses the
// records section straight after it (no copy of the compressed bytes)
// and then calls SealBatch.
func AppendBatchHeader(dst []byte, h BatchHeader) ([]byte, error) {
	if h.Records < 1 || h.Records > math.MaxInt32 {
		return dst, fmt.Errorf("kafkarec: a record batch of %d records (want 1 to %d)", h.Records, math.MaxInt32)
	}
	dst = binary.BigEndian.AppendUint64(dst, 0)              // baseOffset
	dst = binary.BigEndian.AppendUint32(dst, 0)              // batchLength, set by SealBatch
	dst = binary.BigEndian.AppendUint32(dst, math.MaxUint32) // partitionLeaderEpoch -1
	dst = append(dst, 2)                                     // magic
	dst = binary.BigEndian.AppendUint32(dst, 0)              // crc, set by SealBatch
	dst = binary.BigEndian.AppendUint16(dst, codecZstd)      // attributes
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Records-1))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Timestamp)) // baseTimestamp
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Timestamp)) // maxTimestamp
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Records))
	return dst, nil
}

// SealBatch sets the batch length and the CRC-32C of b, one whole batch
// (header and compressed records).
func SealBatch(b []byte) {
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(len(b)-batchLengthAt-4))
	binary.BigEndian.PutUint32(b[crcAt:], crc32.Checksum(b[attributesAt:], castagnoli))
}

// StampProducer sets a sealed batch's producer id, epoch and base
// sequence (an idempotent producer's, chosen when it is sent) and its
// CRC-32C again.
func StampProducer(b []byte, pid int64, epoch int16, seq int32) {
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], uint16(epoch))
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	SealBatch(b)
}
