package lines

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/cli"
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

// RetryReporter is produce's report of the agent's failures: it says on
// stderr when the agent fails and when it answers again, counting down to
// --timeout, so that a retry never looks like a hang: at 2, 4, 8 and 16 s of failing, then every 30 s (the client
// reports every 2 s; 300 lines in a 10-minute outage buried the cause).
func RetryReporter(stderr io.Writer) func(client.RetryStatus) {
	next := 2 * time.Second
	return func(st client.RetryStatus) {
		switch {
		case !st.Failing:
			fmt.Fprintf(stderr, "produce: agent at %s answers again after %s\n", st.Agent, st.For.Round(time.Second))
		case st.First:
			next = 2 * time.Second
			fmt.Fprintf(stderr, "produce: agent at %s: %v; %s\n", st.Agent,
				cli.DialHint(errors.New(st.Cause), "agent", st.Agent, "--agent", "the agent's --ingest address"), givingUp(st.GiveUpIn))
		case st.For >= next && st.GiveUpIn >= time.Second:
			next = min(2*next, st.For+30*time.Second)
			fmt.Fprintf(stderr, "produce: agent at %s still failing after %s (%s); %s\n",
				st.Agent, st.For.Round(time.Second), st.Cause, givingUp(st.GiveUpIn))
		}
	}
}

// givingUp ends a retry line: the time left before --timeout, or that it
// is up (the call's own error follows), never "giving up in 0s".
func givingUp(left time.Duration) string {
	if left < time.Second {
		return "--timeout reached, giving up"
	}
	return fmt.Sprintf("retrying, giving up in %s (--timeout)", left.Round(time.Second))
}

// ProgressEvery is produce's --progress: a line on stderr at most once a
// second with the lines spooled so far (nil: no progress).
func ProgressEvery(on bool, stderr io.Writer) func(sent int) {
	if !on {
		return nil
	}
	last := time.Now()
	return func(sent int) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "produce: %s spooled\n", defaults.Plural(sent, "line"))
		}
	}
}
