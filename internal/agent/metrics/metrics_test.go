package metrics

import (
	"errors"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestLastErrorPresentWhileRetrying: while the agent fails to connect
// again and again, every scrape finds one sluice_agent_last_error series
// with value 1 (it once found none: the gauge was reset, then set, and
// a scrape between the two saw no error at all; a CI run's
// TestDriverRefusals read it so). Bounded: 20,000 failures.
func TestLastErrorPresentWhileRetrying(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SinkFailed("Unavailable", errors.New("down"))
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		codes := []string{"Unavailable", "Unavailable", "HandshakeTimeout"}
		for i := range 20000 {
			m.SinkFailed(codes[i%len(codes)], errors.New("down"))
		}
	}()
	missing, scrapes := 0, 0
	for {
		select {
		case <-done:
			wg.Wait()
			if missing > 0 {
				t.Fatalf("%d of %d scrapes found no last_error series set to 1", missing, scrapes)
			}
			return
		default:
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		scrapes++
		found := false
		for _, mf := range mfs {
			if mf.GetName() != "sluice_agent_last_error" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				if mt.GetGauge().GetValue() == 1 {
					found = true
				}
			}
		}
		if !found {
			missing++
		}
	}
}

// TestLastErrorClearedOnConnect: a session clears the error, and the
// next failure is the only series.
func TestLastErrorClearedOnConnect(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SinkFailed("Unavailable", errors.New("down"))
	m.SinkFailed("HandshakeTimeout", errors.New("slow"))
	m.SinkConnected()
	if n := lastErrorSeries(t, reg); n != 0 {
		t.Fatalf("%d last_error series after connecting, want 0", n)
	}
	m.SinkFailed("PermissionDenied", errors.New("no"))
	if n := lastErrorSeries(t, reg); n != 1 {
		t.Fatalf("%d last_error series, want 1", n)
	}
}

func lastErrorSeries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_agent_last_error" {
			return len(mf.GetMetric())
		}
	}
	return 0
}
