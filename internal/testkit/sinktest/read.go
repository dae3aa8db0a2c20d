package sinktest

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// StoredRecords reads every record in the store of the sink at addr, in
// store order, through a Read session (the protocol, not the sink's
// internals, so that a test checks what a consumer would get). The
// agent's tests and the collectors' had a copy each.
func StoredRecords(tb testing.TB, addr string) [][]byte {
	tb.Helper()
	d, cc, err := grpctransport.Connect(addr, grpctransport.ClientOptions{MaxRecvBytes: 64 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound)
	defer cancel()
	c, err := d.Read(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(nil)
	// A Send that finds the stream ended says only EOF; the sink's
	// reason is what Recv returns then (CI saw a bare EOF here once).
	for _, fr := range []protocol.Frame{&protocol.ReadStart{}, &protocol.ReadMore{N: 1 << 30}} {
		if err := c.Send(fr); err != nil {
			_, why := c.Recv()
			tb.Fatalf("send %s: %v; the sink ended the stream with: %v (status %v)", protocol.Name(fr), err, why, protocol.StatusOf(why))
		}
	}
	var out [][]byte
	for {
		f, err := c.Recv()
		if err != nil {
			tb.Fatalf("reading the store: %v (status %v)", err, protocol.StatusOf(err))
		}
		switch f := f.(type) {
		case *protocol.Stored:
			for _, r := range f.Records {
				out = append(out, bytes.Clone(r))
			}
		case *protocol.EndOfLog:
			return out
		}
	}
}
