package sinkclient

import (
	"testing"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/kafkarec"
)

// KafkaZstdPayload is what an agent sealing in codec.KafkaZstd sends for
// message id of agent: its records as kafkarec.AppendRecords' records
// section, zstd-compressed.
func KafkaZstdPayload(t testing.TB, agent string, id uint64, recs ...string) []byte {
	t.Helper()
	var b batch.Builder
	for _, r := range recs {
		if err := b.Add([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	section, _, err := kafkarec.AppendRecords(nil, b.Bytes(), []byte(agent), id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, section, codec.KafkaZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
