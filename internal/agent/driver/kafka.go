package driver

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/kafkarec"
)

// unsealer turns a message the agent sealed as a Kafka records section
// (codec.KafkaZstd) back into the zstd batch it would have sealed
// otherwise, for a session whose sink did not ask for Kafka records
// (Welcome.Codec). A kafka_zstd payload goes only where it was asked for:
// a sink older than the codec does not know the Request field, reads a
// request without a payload and refuses the message for good, and a
// refused message is never delivered. The path is rare — the spooled
// backlog after a failover from a sink in front of Kafka to another kind
// — so it favours being simple over being fast. One per write loop.
type unsealer struct {
	dec     *codec.Decoder
	enc     *codec.Encoder
	section []byte
	b       batch.Builder
}

// toZstd returns the zstd batch of the records of body, the KafkaZstd
// payload of message id of agent with count records. The section is
// checked as a sink checks it (kafkarec.Records): the spool's checksums
// guard the bytes, this guards against a sealing bug reaching a sink.
func (u *unsealer) toZstd(body []byte, agent string, id uint64, count uint32) ([]byte, error) {
	if u.dec == nil {
		// No agent seals more than defaults.MaxMessage (the largest
		// --max-message, whatever this run's is: the spool may hold an
		// earlier run's messages); a frame claiming more is not ours.
		u.dec = codec.NewDecoder(defaults.MaxMessage)
		u.enc = codec.NewEncoder(codec.LevelDefault)
	}
	section, err := u.dec.Decode(u.section[:0], body, codec.KafkaZstd, 0)
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", id, err)
	}
	u.section = section[:0]
	u.b.Reset()
	if err := kafkarec.Records(section, []byte(agent), id, int(count), func(_ int, v []byte) error {
		return u.b.Add(v)
	}); err != nil {
		return nil, fmt.Errorf("message %d: %w", id, err)
	}
	return u.enc.Encode(nil, u.b.Bytes(), codec.Zstd, 0)
}
