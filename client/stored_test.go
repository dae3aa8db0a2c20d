package client_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/client"
)

// TestConsumerReadStored: ReadStored reads the whole store when it holds
// less than maxBytes, and stops once it holds maxBytes or more (after the
// message that reached it) when the store holds more.
func TestConsumerReadStored(t *testing.T) {
	s := newSink(t)
	p := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()))
	want := produceMessages(t, p, "m", 20) // single-record messages of 8 bytes
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	all, err := newConsumer(t, client.SinkAddrs(s.addr)).ReadStored(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("ReadStored of the whole store: %d records, want %d", len(all), len(want))
	}
	some, err := newConsumer(t, client.SinkAddrs(s.addr)).ReadStored(ctx, 3*int64(len(want[0])))
	if err != nil {
		t.Fatal(err)
	}
	if len(some) != 3 {
		t.Fatalf("ReadStored of 3 records' bytes: %d records, want 3", len(some))
	}
}
