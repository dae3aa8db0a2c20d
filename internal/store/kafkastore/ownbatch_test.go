package kafkastore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/testkit/kafkatest"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// TestOwnBatchesWriteAddedPartitions: partitions added to the topic while
// the sink runs are written to (agents' keys spread over them), as they
// were when franz-go's producer refreshed its metadata: the writer asks
// for the leaders again once the store's health probe lists more
// partitions than it knows.
func TestOwnBatchesWriteAddedPartitions(t *testing.T) {
	b := kafkatest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u, err := ParseURL("kafka://" + b.Addr + "/own-added")
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := Open(testEnv(t), u)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.own == nil {
		t.Fatal("the default store does not write its own batches")
	}
	id := uint64(0)
	appendFromAgents := func() {
		t.Helper()
		var msgs []*store.Message
		for a := range 16 {
			var bb batch.Builder
			if err := bb.Add([]byte("v")); err != nil {
				t.Fatal(err)
			}
			agent := fmt.Sprintf("edge-%d", a)
			id++
			msgs = append(msgs, &store.Message{Agent: agent, AgentB: []byte(agent), ID: id, Records: 1,
				Codec: codec.Plain, Body: bytes.Clone(bb.Bytes())})
		}
		if _, err := k.Append(msgs); err != nil {
			t.Fatal(err)
		}
	}
	appendFromAgents()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreatePartitions(ctx, 3, "own-added"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "records in the added partitions", func() bool {
		appendFromAgents()
		ends, err := adm.ListEndOffsets(ctx, "own-added")
		if err != nil {
			return false
		}
		written := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Partition > 0 && o.Offset > 0 {
				written++
			}
		})
		return written == 3
	})
}
