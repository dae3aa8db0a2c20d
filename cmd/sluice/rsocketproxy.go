package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/memrelease"
	"github.com/sluicehq/sluice/internal/rsproxy"
	"github.com/sluicehq/sluice/internal/status"
)

func init() {
	register("rsocket proxy", "TCP load balancer for RSocket servers that sends each RESUME to the server holding its session", runRSocketProxy)
}

func runRSocketProxy(args []string, stdout, stderr io.Writer) error {
	ctx, cancel := signalContext()
	defer cancel()
	return rsocketProxy(ctx, args, stdout, stderr)
}

// rsocketProxy runs `sluice rsocket proxy` until ctx ends. It prints
// "listening tcp://HOST:PORT" on stdout once it accepts.
func rsocketProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rsocket proxy", "--listen tcp://HOST:PORT --backends tcp://A:PORT,tcp://B:PORT,... [--affinity=false] [--metrics HOST:PORT] [flags]", stderr)
	listen := fs.String("listen", "", "listen URL, tcp://HOST:PORT (required)")
	backends := fs.String("backends", "", "the RSocket servers, comma-separated tcp://HOST:PORT (required)")
	affinity := fs.Bool("affinity", true, "route each RESUME to the server that holds its session (rendezvous hashing of the resume token); false: round-robin, as a plain TCP balancer would (for comparison)")
	maxTokens := fs.Int("max-tokens", rsproxy.DefaultMaxTokens, "resume tokens whose server is remembered; beyond, the oldest fall back to hashing")
	metrics := fs.String("metrics", "", status.MetricsHelp(false, "", ""))
	logLevel := cliflag.LogLevel(fs, "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	host, ok := strings.CutPrefix(*listen, "tcp://")
	if !ok || host == "" {
		return usageError(fs, "--listen tcp://HOST:PORT is required (the proxy reads the first frame, so it cannot balance TLS)")
	}
	var addrs []string
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		a, ok := strings.CutPrefix(b, "tcp://")
		if !ok || a == "" {
			return usageError(fs, "--backends: %q is not tcp://HOST:PORT", b)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return requireFlags(fs, "backends", "")
	}
	log := logutil.NewLogger(stderr, *logLevel)
	memrelease.Start(ctx, log)
	p, err := rsproxy.New(rsproxy.Config{Backends: addrs, Affinity: *affinity, MaxTokens: *maxTokens, Logger: log})
	if err != nil {
		return err
	}
	reg := newRegistry()
	rsproxy.RegisterMetrics(reg, p)
	if err := serveMetrics(ctx, *metrics, reg, log, p.Ready, nil); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", host)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	shown := "tcp://" + ln.Addr().String()
	fmt.Fprintln(stdout, "listening", shown)
	log.Info("rsocket proxy serving", "url", shown, "backends", strings.Join(addrs, ","), "affinity", *affinity)
	return p.Serve(ctx, ln)
}
