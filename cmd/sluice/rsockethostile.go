package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/lab/hostile"
	"github.com/sluicehq/sluice/internal/lab/rsockethostile"
)

func init() {
	register("rsocket hostile", "misbehave against an RSocket server on purpose (silent, half frames, floods): docs/rsocket.md, Hostile clients", runRSocketHostile)
}

func runRSocketHostile(args []string, stdout, stderr io.Writer) error {
	names := hostile.Names(rsockethostile.Modes)
	fs := newFlags("rsocket hostile", "--url tcp://HOST:PORT|ws://HOST:PORT/PATH --mode MODE [--conns N] [--frame SIZE] [--duration D] [flags]", stderr)
	url := fs.String("url", "", "server URL: tcp://HOST:PORT or ws://HOST:PORT/PATH")
	mode := fs.String("mode", "", "misbehaviour: "+strings.Join(names, ", ")+" (docs/rsocket.md, Hostile clients)")
	conns := fs.Int("conns", 100, "connections misbehaving at once")
	frameSize := byteSize(1 << 20)
	fs.Var(&frameSize, "frame", "data of each frame the floods and half-frame send")
	duration := fs.Duration("duration", 10*time.Second, "each connection is closed by then, if the server has not closed it")
	maxFrames := fs.Int("max-frames", 100000, "frames a flood sends on one connection, at most; the connection then stays open, unread, until --duration")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "url", *url, "mode", *mode); err != nil {
		return err
	}
	m, err := rsockethostile.ParseMode(*mode)
	if err != nil {
		return &exitError{code: 2, msg: "--mode: " + err.Error()}
	}
	if *conns <= 0 || frameSize <= 0 || frameSize > 16<<20-64 || *duration <= 0 || *maxFrames <= 0 {
		return &exitError{code: 2, msg: "--conns, --duration and --max-frames must be positive, --frame between 1B and 16MiB less 64B"}
	}
	ctx, cancel := signalContext()
	defer cancel()
	rep, err := rsockethostile.Run(ctx, rsockethostile.Config{URL: *url, Mode: m, Conns: *conns,
		FrameSize: int(frameSize), Duration: *duration, MaxFrames: *maxFrames})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	fmt.Fprintf(stdout, "%s: %s; %d frames, %s sent\n", m, rep.Summary(), rep.Frames, humanSize(rep.Bytes))
	if rep.Opened == 0 {
		return fmt.Errorf("no connection: %v", rep.FirstErr)
	}
	return nil
}
