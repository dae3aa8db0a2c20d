package driver

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/kafkarec"
)

// The unsealer decodes a spooled Kafka records section within the
// largest message any agent seals (defaults.MaxMessage), not the 256 MiB
// a sink may be configured for: a frame that claims more is refused
// before its output is allocated. A section of the largest size still
// converts.
func TestUnsealerBoundedByAgentMaxMessage(t *testing.T) {
	enc := codec.NewEncoder(codec.LevelDefault)
	agent := []byte("agent-1")
	section := func(n, size int) []byte {
		var s []byte
		val := bytes.Repeat([]byte{'x'}, size)
		for i := range n {
			s = kafkarec.AppendRecord(s, int32(i), val, kafkarec.RecordHeaders{Agent: agent, Message: 7, Index: uint32(i), Count: uint32(n)})
		}
		return s
	}
	fits := section(30, 100<<10) // about 3 MiB
	if len(fits) > defaults.MaxMessage {
		t.Fatalf("test section of %d bytes", len(fits))
	}
	body, err := enc.Encode(nil, fits, codec.KafkaZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	var u unsealer
	if _, err := u.toZstd(body, string(agent), 7, 30); err != nil {
		t.Fatalf("a section within the agent's largest message: %v", err)
	}
	big := section(50, 100<<10) // about 5 MiB
	body, err = enc.Encode(nil, big, codec.KafkaZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = u.toZstd(body, string(agent), 7, 50)
	if err == nil || !errors.Is(err, codec.ErrTooLarge) {
		t.Fatalf("a section of %d bytes, beyond any agent's message: %v, want codec.ErrTooLarge", len(big), err)
	}
}
