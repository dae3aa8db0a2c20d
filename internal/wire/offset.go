package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseOffset reads a store offset as a user writes it: OFFSET, or
// PARTITION:OFFSET for a Kafka-backed sink, packed as the sink expects
// (see KafkaOffsetBits).
func ParseOffset(s string) (uint64, error) {
	ps, offs, ok := strings.Cut(s, ":")
	if !ok {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad offset %q: want OFFSET or PARTITION:OFFSET", s)
		}
		return n, nil
	}
	p, err1 := strconv.ParseUint(ps, 10, 16)
	n, err2 := strconv.ParseUint(offs, 10, 64)
	if err1 != nil || err2 != nil || n >= 1<<KafkaOffsetBits {
		return 0, fmt.Errorf("bad offset %q: want PARTITION:OFFSET, partition < 65536, offset < 2^48", s)
	}
	return p<<KafkaOffsetBits | n, nil
}

// FormatOffset shows a packed Kafka offset of a partition other than 0 as
// PARTITION:OFFSET, any other as a number: what ParseOffset reads back.
func FormatOffset(v uint64) string {
	if p := v >> KafkaOffsetBits; p != 0 {
		return strconv.FormatUint(p, 10) + ":" + strconv.FormatUint(v&(1<<KafkaOffsetBits-1), 10)
	}
	return strconv.FormatUint(v, 10)
}
