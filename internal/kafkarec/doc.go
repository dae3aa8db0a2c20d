// Package kafkarec encodes sluice's records as Kafka records and checks
// them, for a sink that hands Kafka what an agent compressed instead of
// decompressing, re-encoding and compressing every message again (issue
// 27, the "Kafka-native hop"): the agent encodes its message as the
// records section of a Kafka v2 record batch (AppendRecords) and
// compresses it; the sink decompresses it only to check every record's
// identity (Records) and puts the agent's compressed bytes, untouched,
// behind a batch header (AppendBatch).
//
// It also holds the one thing both ends and the Kafka store share: the
// value of the `sluice` header every record carries (AppendHeaderValue,
// ParseHeaderValue), the record's dedup key and the size of its message.
//
// The formats are Kafka's (https://kafka.apache.org/documentation/#recordbatch):
//
//	batch   = baseOffset int64, batchLength int32, partitionLeaderEpoch int32,
//	          magic int8 (2), crc uint32 (CRC-32C of attributes..end),
//	          attributes int16, lastOffsetDelta int32, baseTimestamp int64,
//	          maxTimestamp int64, producerId int64, producerEpoch int16,
//	          baseSequence int32, records int32, then the records section
//	record  = length varint, attributes int8, timestampDelta varlong,
//	          offsetDelta varint, keyLength varint, key, valueLength varint,
//	          value, headers varint, header*
//	header  = keyLength varint, key, valueLength varint, value
//
// All integers of the batch header are big-endian; Kafka's varints are
// zigzag-encoded (encoding/binary's Varint). The records section is what
// the batch's compression codec compresses.
//
// The package is pure: no I/O, no clock, no goroutines. Decoding never
// panics and, like internal/batch, accepts exactly one encoding of each
// section (shortest-form varints, nothing trailing), so a section that
// passes Records is byte for byte what AppendRecords would build.
package kafkarec
