// Package wire holds the transport settings that an agent and a sink must
// agree on, in one place, so the code and docs/protocol.md (section 1)
// cannot drift apart: wire_test.go reads the document and checks its
// numbers against these constants, and the agent's and sink's gRPC options.
package wire

const (
	// InitialWindowSize is the HTTP/2 flow-control window of each stream,
	// on both sides. gRPC's default (64 KiB, grown by BDP estimation)
	// caps a stream at window ÷ RTT; 64 MiB lets one stream fill
	// 1 Gbit/s at an RTT of 500 ms.
	InitialWindowSize = 64 << 20

	// InitialConnWindowSize is the HTTP/2 window of the whole connection:
	// twice a stream's, so a stream being torn down never starves its
	// successor on the same connection.
	InitialConnWindowSize = 2 * InitialWindowSize
)

// KafkaOffsetBits: with the Kafka store, a read position is a partition and
// an offset in it, packed into the one uint64 of StoredMessage.offset,
// ReadStart.from_offset, commit and EndOfLog.next_offset: the partition in
// the top 16 bits, the offset in the low 48 (2^48 records is 280 trillion).
// In a topic of one partition the packed offset is the Kafka offset itself.
// The sink packs, and consumers (the client package, sluice consume) unpack.
const KafkaOffsetBits = 48
