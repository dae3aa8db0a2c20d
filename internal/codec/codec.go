package codec

import (
	"errors"
	"fmt"
	"strconv"
)

// Kind is the encoding of one message body. Its values equal those of the
// wire enum sluice.v1.Codec, so a Kind converts to and from it directly, and
// the zero value is invalid rather than silently meaning Plain.
type Kind uint8

const (
	// Plain is the body uncompressed (Request.plain). Used when compression
	// does not pay off; every sink understands it.
	Plain Kind = 1
	// Zstd is the body as one zstd frame without a dictionary
	// (Request.zstd).
	Zstd Kind = 2
	// ZstdDict is the body as one zstd frame compressed with a dictionary
	// both sides hold (Request.zstd_dict). Small messages of similar
	// records compress far better this way.
	ZstdDict Kind = 3
	// KafkaZstd is one zstd frame without a dictionary, like Zstd, of a
	// different body: not an internal/batch batch but the records section
	// of a Kafka v2 record batch as kafkarec.AppendRecords builds it for
	// the message (Request.kafka_zstd). A sink in front of Kafka puts
	// these bytes, untouched, behind a record batch header instead of
	// compressing every message a second time (issue 27's Kafka-native
	// hop). The agent seals in it only when its sink's Welcome asks for it.
	KafkaZstd Kind = 4
)

// String returns the kind's name as used in logs and benchmark labels.
func (k Kind) String() string {
	switch k {
	case Plain:
		return "plain"
	case Zstd:
		return "zstd"
	case ZstdDict:
		return "zstd_dict"
	case KafkaZstd:
		return "kafka_zstd"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseAgentKind reads an agent's --compression: "plain", "zstd", or
// "dict" (ZstdDict; the names are the flag's, not String's).
func ParseAgentKind(s string) (Kind, error) {
	switch s {
	case "plain":
		return Plain, nil
	case "zstd":
		return Zstd, nil
	case "dict":
		return ZstdDict, nil
	}
	return 0, fmt.Errorf("--compression %q: want plain, zstd or dict", s)
}

// Errors of Decode, Encode and the dictionary functions. Returned errors wrap
// them with details; test with errors.Is.
var (
	// ErrUnknownDictionary means the message names a dictionary this Encoder
	// or Decoder does not hold. On the sink it is retryable: the agent
	// uploads the dictionary and resends (ERROR_CODE_UNKNOWN_DICTIONARY).
	ErrUnknownDictionary = errors.New("codec: unknown dictionary")

	// ErrTooLarge means the decoded body would exceed the Decoder's maxSize
	// (ERROR_CODE_OVERSIZE on the sink). It is detected from the frame
	// header when the frame declares its size, before any allocation, and
	// otherwise as soon as the output passes the limit.
	ErrTooLarge = errors.New("codec: decoded body too large")

	// ErrCorrupt means the payload is not a valid frame of the expected
	// shape: bad zstd data, checksum mismatch, trailing bytes, several or
	// skippable frames, or a frame naming a different dictionary than the
	// message does (ERROR_CODE_BAD_PAYLOAD on the sink). When zstd itself
	// rejected the data the error wraps zstd's error as well.
	ErrCorrupt = errors.New("codec: corrupt payload")

	// ErrInvalidDictionary means bytes offered as a dictionary are not a
	// usable zstd dictionary, or its ID does not match its header.
	ErrInvalidDictionary = errors.New("codec: invalid dictionary")

	// ErrDictionaryConflict means a dictionary was added under an id that
	// already denotes different bytes. The protocol requires an id to always
	// denote the same dictionary, so this is a protocol violation, not
	// something to resolve by replacing the old one.
	ErrDictionaryConflict = errors.New("codec: dictionary id already used for different bytes")
)

// errKind is returned for a Kind outside Plain, Zstd, ZstdDict and KafkaZstd, or a
// dictionary id given with a kind that takes none: both are caller bugs,
// not bad payloads, so they are not ErrCorrupt.
var errKind = errors.New("codec: invalid kind or dictionary id")
