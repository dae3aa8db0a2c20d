package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lab/netem"
)

func init() {
	register("netem", "emulate a WAN link (shared rate, delay, jitter) as a TCP proxy in front of a server", runNetem)
}

func runNetem(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("netem", "--listen ADDR --target HOST:PORT [--rate RATE] [--delay D] [flags]", stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address clients connect to")
	target := fs.String("target", "", "the server every connection is forwarded to, HOST:PORT")
	rateFlag := fs.String("rate", "0", "bottleneck rate per direction shared by all connections: e.g. 1Gbit, 40Mbit, 25MB (bytes/s); 0 = unlimited")
	delay := fs.Duration("delay", 0, "one-way delay (adds twice this to the RTT)")
	jitter := fs.Duration("jitter", 0, "uniform ± jitter on the delay (never reorders a connection's bytes)")
	queue := byteSize(0)
	fs.Var(&queue, "queue", "bottleneck buffer (default max(256KiB, rate × 100ms))")
	statsJSON := fs.Bool("stats-json", false, "print the link's counters as one JSON line on exit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rate, err := parseRate(*rateFlag)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	if err := requireFlags(fs, "target", *target); err != nil {
		return err
	}
	l, err := netem.New(netem.Config{Target: *target, Rate: rate, Delay: *delay, Jitter: *jitter, QueueBytes: int64(queue)})
	if err != nil {
		return err
	}
	addr, err := l.Listen(*listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "netem: %s → %s, rate %s, RTT +%s\n", addr, *target, rateString(rate), 2**delay)
	ctx, stop := signalContext()
	defer stop()
	<-ctx.Done()
	st := l.Stats()
	l.Close()
	if *statsJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	fmt.Fprintf(stderr, "netem: %s, %s up, %s down\n", defaults.Plural(st.Accepted, "connection"), humanSize(st.BytesUp), humanSize(st.BytesDown))
	return nil
}

// parseRate reads a link rate: 1Gbit, 40Mbit, 25MB (cliflag.ParseRate).
func parseRate(s string) (int64, error) { return cliflag.ParseRate(s) }

func rateString(bytesPerSec int64) string { return defaults.RateString(bytesPerSec) }
