package lines

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/wire"
)

// ReconnectReporter says on w when the sink goes away and comes back:
// once per state change, not per attempt (a 65 s outage printed 665
// lines before issue 24). The first failure says what broke (through
// hint, which may add what to check), a second that the sink stays away.
func ReconnectReporter(w io.Writer, hint func(err error, addr string) error) []client.ConsumerOpt {
	var failures int
	var downSince time.Time
	return []client.ConsumerOpt{
		client.OnReconnect(func(ev client.Reconnect) {
			failures++
			switch failures {
			case 1:
				at := wire.FormatOffset(ev.From)
				if ev.FromCommitted {
					at = "the group's committed offset"
				}
				fmt.Fprintf(w, "consume: sink at %s: %v; reconnecting, resuming at offset %s\n", ev.Addr, hint(ev.Err, ev.Addr), at)
				downSince = time.Now()
			case 2:
				fmt.Fprintf(w, "consume: sink unreachable since %s; retrying every ≤%v\n",
					downSince.Format(time.TimeOnly), client.ReconnectMax)
			}
		}),
		client.OnReconnected(func(addr string, d time.Duration) {
			if failures > 0 {
				fmt.Fprintf(w, "consume: sink at %s reachable again after %s\n", addr, d.Round(100*time.Millisecond))
			}
			failures = 0
		}),
	}
}

// ReportProgress says every second on w how far c has read, until the
// returned function is called.
func ReportProgress(c *client.Consumer, w io.Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				st := c.Stats()
				fmt.Fprintf(w, "consume: reading: %s, %s, next offset %s\n",
					defaults.Plural(st.Messages, "message"), defaults.Plural(st.Records, "record"), wire.FormatOffset(st.Position))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
