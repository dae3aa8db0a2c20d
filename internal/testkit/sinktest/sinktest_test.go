package sinktest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// endOfEmptyLog reads the sink's store through a Read session and wants
// the end at once: the sink at addr serves, and its store is empty.
func endOfEmptyLog(t *testing.T, addr string) {
	t.Helper()
	if recs := StoredRecords(t, addr); len(recs) != 0 {
		t.Fatalf("read of an empty sink: %d records, want the end of the log", len(recs))
	}
}

// A started sink serves; stopped, its address refuses; restarted, it
// serves again on the same address and data directory.
func TestStartStopRestart(t *testing.T) {
	s := Start(t, sink.Config{}, "127.0.0.1:0")
	addr, dir := s.Addr, s.DataDir()
	endOfEmptyLog(t, addr)
	s.Stop()
	s.Stop() // a second Stop does nothing
	if d, cc, err := grpctransport.Connect(addr, grpctransport.ClientOptions{}); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = d.Read(ctx)
		cancel()
		cc.Close()
		if err == nil {
			t.Fatal("a stopped sink's address answered")
		}
	}
	s.Restart()
	if s.Addr != addr || s.DataDir() != dir {
		t.Fatalf("restarted on %s in %s, want %s in %s", s.Addr, s.DataDir(), addr, dir)
	}
	endOfEmptyLog(t, s.Addr)
}
