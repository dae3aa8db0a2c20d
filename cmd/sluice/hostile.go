package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/hostile"
)

func init() {
	register("hostile", "misbehave against a non-RSocket listener on purpose (silent, stalls, huge lengths, floods, resets): docs/reliability.md, Hostile clients on every listener", runHostile)
}

func runHostile(args []string, stdout, stderr io.Writer) error {
	modes := hostile.Names(hostile.Modes)
	targets := make([]string, len(hostile.Targets))
	for i, t := range hostile.Targets {
		targets[i] = t.Name
	}
	fs := newFlags("hostile", "--target "+strings.Join(targets, "|")+" --addr HOST:PORT --mode MODE [--conns N] [--duration D] [flags]", stderr)
	target := fs.String("target", "", "listener kind: "+strings.Join(targets, ", "))
	addr := fs.String("addr", "", "listener address, HOST:PORT")
	source := fs.String("source", "", "local IP the connections come from, e.g. 127.0.0.2 (default: any)")
	mode := fs.String("mode", "", "misbehaviour: "+strings.Join(modes, ", ")+" (docs/reliability.md, Hostile clients on every listener)")
	conns := fs.Int("conns", 100, "connections misbehaving at once")
	duration := fs.Duration("duration", 35*time.Second, "each connection is closed by then, if the server has not closed it")
	maxRequests := fs.Int("max-requests", 10000, "requests or streams a flood sends, and resets, per connection, at most; a flood's connection then stays open, unread, until --duration")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *target == "" || *addr == "" || *mode == "" {
		return &exitError{code: 2, msg: "--target, --addr and --mode are required"}
	}
	tg, err := hostile.ParseTarget(*target)
	if err != nil {
		return &exitError{code: 2, msg: "--target: " + err.Error()}
	}
	m, err := hostile.ParseMode(*mode)
	if err != nil {
		return &exitError{code: 2, msg: "--mode: " + err.Error()}
	}
	if *conns <= 0 || *duration <= 0 || *maxRequests <= 0 {
		return &exitError{code: 2, msg: "--conns, --duration and --max-requests must be positive"}
	}
	ctx, cancel := signalContext()
	defer cancel()
	rep, err := hostile.Run(ctx, hostile.Config{Addr: *addr, Source: *source, Target: tg, Mode: m, Conns: *conns,
		Duration: *duration, MaxRequests: *maxRequests})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	fmt.Fprintf(stdout, "%s %s: %s; %d requests, %s sent\n", tg.Name, m, rep.Summary(), rep.Requests, humanSize(rep.Bytes))
	if rep.Opened == 0 {
		return fmt.Errorf("no connection: %v", rep.FirstErr)
	}
	return nil
}
