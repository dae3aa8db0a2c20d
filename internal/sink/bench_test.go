package sink

import (
	"io"
	"log/slog"
	"testing"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
)

// BenchmarkSend measures one agent stream over loopback keeping its whole
// credit in flight: validation, group commit with fdatasync, acks. One op
// is one message of 64 records (about 8 KiB).
func BenchmarkSend(b *testing.B) {
	h := newHarness(b, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	a := h.connect("bench")
	body := makeBody(records(0, 64)...)
	req := &sluicev1.Request{Version: 1, RecordCount: 64, Payload: &sluicev1.Request_Plain{Plain: body}}
	limit := a.welcome.GetCredits().GetMessageLimit()
	var sent, acked uint64
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for acked < uint64(b.N) {
		for sent < uint64(b.N) && sent < limit {
			req.MessageId = sent
			if err := a.stream.Send(req); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		r, ok := <-a.resps
		if !ok {
			b.Fatal(<-a.end)
		}
		if c := r.GetInfo().GetCredits(); c != nil {
			limit = max(limit, c.MessageLimit)
		}
		for _, rg := range r.GetAck().GetRanges() {
			acked += rg.Last - rg.First + 1
		}
	}
}
