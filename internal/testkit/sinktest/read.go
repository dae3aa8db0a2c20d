package sinktest

import (
	"bytes"
	"context"
	"errors"
	"io"
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
		err := c.Send(fr)
		if _, credit := fr.(*protocol.ReadMore); credit && errors.Is(err, io.EOF) {
			// The session ended well before our credit arrived. A read
			// that does not follow ends after its first EndOfLog, which
			// the sink sends at once, without credit, only when it is
			// already at the end: with records stored it would have
			// waited for the credit. So the store was empty (CI saw this
			// race in TestStartStopRestart: the EndOfLog and the end of
			// the stream came before the ReadMore was sent).
			return nil
		}
		if err != nil {
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
