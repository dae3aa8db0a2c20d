package sink

import (
	"log/slog"
	"strings"
	"testing"

	sluicev1 "github.com/sluicehq/sluice/api/sluice/v1"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/testkit/sinkclient"
)

// BenchmarkSend measures one agent stream over loopback gRPC keeping its
// whole credit in flight: receive, validation, group commit with
// fdatasync, acks. One op is one message; the client is a raw gRPC stream
// in the same process, so allocs/op and B/op include its side too (the
// same before and after a sink change, so the difference is the sink's).
//
//	go test -run '^$' -bench BenchmarkSend -benchmem -benchtime 2s ./internal/sink/
func BenchmarkSend(b *testing.B) {
	b.Run("plain-64rec", func(b *testing.B) {
		body := sinkclient.Body(sinkclient.Records(0, 64)...)
		benchSend(b, &sluicev1.Request{Version: 1, RecordCount: 64, Payload: &sluicev1.Request_Plain{Plain: body}}, len(body))
	})
	b.Run("zstd-2048rec", func(b *testing.B) {
		// 2,048 log-like records (about 230 KiB plain) that zstd shrinks
		// about tenfold.
		recs := make([]string, 2048)
		for i := range recs {
			recs[i] = "ts=2026-11-23T21:00:00Z level=info msg=\"request served\" id=" + itoa(uint64(i)*7919) + " " + strings.Repeat("ab", i%20)
		}
		plain := sinkclient.Body(recs...)
		z, err := codec.NewEncoder(codec.LevelDefault).Encode(nil, plain, codec.Zstd, 0)
		if err != nil {
			b.Fatal(err)
		}
		benchSend(b, &sluicev1.Request{Version: 1, RecordCount: uint32(len(recs)), Payload: &sluicev1.Request_Zstd{Zstd: z}}, len(plain))
	})
}

func benchSend(b *testing.B, req *sluicev1.Request, size int) {
	h := newHarness(b, func(c *Config) { c.Logger = slog.New(slog.DiscardHandler) })
	a := h.connect("bench")
	limit := a.Welcome.GetCredits().GetMessageLimit()
	var sent, acked uint64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for acked < uint64(b.N) {
		for sent < uint64(b.N) && sent < limit {
			req.MessageId = sent
			if err := a.Stream.Send(req); err != nil {
				b.Fatal(err)
			}
			sent++
		}
		r, ok := <-a.Resps
		if !ok {
			b.Fatal(<-a.End)
		}
		if c := r.GetInfo().GetCredits(); c != nil {
			limit = max(limit, c.MessageLimit)
		}
		if e := r.GetInfo().GetError(); e != nil {
			b.Fatalf("message %d refused: %v", e.MessageId, e.Detail)
		}
		for _, rg := range r.GetAck().GetRanges() {
			acked += rg.Last - rg.First + 1
		}
	}
}
