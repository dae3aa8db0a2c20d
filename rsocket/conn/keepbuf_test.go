package conn

import (
	"testing"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// After a batch with a large request and its answer, a machine keeps at
// most keepBuf (64 KiB) of arena and output buffer for the next batch;
// larger ones go back to the frame pool. Before, it kept up to 1 MiB of
// each: 100 connections that each once carried a 1 MiB request held
// 100 MiB of arenas outside every budget.
func TestLargePayloadBuffersNotKept(t *testing.T) {
	m := newServer(t, Config{})
	data := make([]byte, 1<<20)
	m.Receive(0, must(frame.AppendRequestResponse(nil, 1, 0, nil, data)))
	rd := m.Ready()
	if len(rd.Events) != 1 || len(rd.Events[0].Data) != len(data) {
		t.Fatalf("events %v", rd.Events)
	}
	if err := m.SendPayload(1, nil, rd.Events[0].Data, true, true); err != nil {
		t.Fatal(err)
	}
	if len(m.Ready().Out) < len(data) {
		t.Fatalf("answer of %d bytes queued", len(m.Ready().Out))
	}
	m.Advance()
	if cap(m.arena) > keepBuf || cap(m.out) > keepBuf {
		t.Fatalf("after the batch the machine keeps an arena of %d and an output buffer of %d bytes; want at most %d each", cap(m.arena), cap(m.out), keepBuf)
	}
}
