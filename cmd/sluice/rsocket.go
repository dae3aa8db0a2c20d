package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/memrelease"
	"github.com/sluicehq/sluice/internal/rsocketcall"
	"github.com/sluicehq/sluice/internal/rsocketd"
	"github.com/sluicehq/sluice/internal/status"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/conn"
	"github.com/sluicehq/sluice/rsocket/frame"
	"github.com/sluicehq/sluice/seglog"
)

func init() {
	register("rsocket serve", "serve RSocket (TCP, WebSocket) with the echo responder", runRSocketServe)
	register("rsocket rr", "RSocket request-response: print the response's data", rsocketClient("rr"))
	register("rsocket fnf", "RSocket fire-and-forget", rsocketClient("fnf"))
	register("rsocket stream", "RSocket request-stream: print each element's data on its own line", rsocketClient("stream"))
	register("rsocket channel", "RSocket request-channel: send stdin lines, print each element received", rsocketClient("channel"))
	register("rsocket push", "RSocket metadata push of --metadata", rsocketClient("push"))
}

// rsocketStdin is the channel command's input (a variable for tests).
var rsocketStdin io.Reader = os.Stdin

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func runRSocketServe(args []string, stdout, stderr io.Writer) error {
	ctx, cancel := signalContext()
	defer cancel()
	return rsocketServe(ctx, args, stdout, stderr)
}

// rsocketServe runs `sluice rsocket serve` until ctx ends. It prints
// "listening URL" on stdout for each listener, with the port resolved.
func rsocketServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rsocket serve", "--listen tcp://HOST:PORT [--listen ws://HOST:PORT/rsocket ...] [--lease] [--resume [--resume-dir DIR]] [--metrics HOST:PORT] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] [flags]", stderr)
	var listen listFlag
	fs.Var(&listen, "listen", "listen URL, tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH (repeatable)")
	tlsCert := fs.String("tls-cert", "", "server certificate (PEM) for tls:// and wss:// listeners")
	tlsKey := fs.String("tls-key", "", "server key (PEM) for tls:// and wss:// listeners")
	tlsClientCA := fs.String("tls-client-ca", "", "require client certificates signed by this CA bundle (PEM): mutual TLS")
	byteCredits := fs.Uint("byte-credits", 0, "accept the byte-credits extension, granting each stream this many bytes (docs/rsocket.md); 0: off")
	lease := fs.Bool("lease", false, "accept clients that ask for lease, granting each 1000 requests per 10s")
	maxPayload := byteSize(conn.DefaultMaxPayloadSize)
	fs.Var(&maxPayload, "max-payload", "largest payload (metadata + data) accepted from a client, whole or reassembled from fragments; a request over it is answered ERROR[INVALID]")
	resume := fs.Bool("resume", false, "accept resumable clients: keep each session through a broken connection (docs/rsocket-resume.md)")
	resumeBuffer := byteSize(conn.DefaultResumeBufferBytes)
	fs.Var(&resumeBuffer, "resume-buffer", "with --resume: sent frames one session retains for replay, at most")
	resumeMemory := byteSize(rsocket.DefaultMaxRetainedBytes)
	fs.Var(&resumeMemory, "resume-memory", "with --resume: sent frames all sessions retain together, at most (each gets an equal share, at least 64KiB, up to --resume-buffer)")
	resumeDir := fs.String("resume-dir", "", "keep resumable sessions in a journal in this directory, so that a server restarted on it (after a crash too) resumes them; implies --resume (docs/rsocket-resume.md)")
	resumeSync := fs.String("resume-sync", "none", "with --resume-dir: none (a process crash loses nothing; a machine crash may), always (fdatasync before each write to a client), or an interval such as 10ms")
	outBudget := byteSize(rsocket.DefaultOutboundBudget)
	fs.Var(&outBudget, "outbound-budget", "output one connection may queue for its peer; past it the connection stops reading, so a peer that never reads costs at most this plus one frame (docs/rsocket.md)")
	serverBudget := byteSize(rsocket.DefaultServerOutboundBudget)
	fs.Var(&serverBudget, "server-outbound-budget", "output all connections of one listener may queue together; past it connections with output queued stop reading")
	writeTimeout := fs.Duration("write-timeout", rsocket.DefaultWriteTimeout, "close a connection whose peer accepted no output for this long; 0: never")
	metrics := fs.String("metrics", "", status.MetricsHelp(false, "", ""))
	logLevel := cliflag.LogLevel(fs, "info", "debug, info, warn or error")
	setupTimeout := fs.Duration("setup-timeout", 10*time.Second, "close a connection whose SETUP (or RESUME) has not come by then")
	frameStall := fs.Duration("frame-stall-timeout", 30*time.Second, "close a connection whose started frame stops arriving for this long (silence within a frame, not its total time)")
	var memLimit rsocketd.MemoryLimit
	fs.Var(&memLimit, "memory-limit", "the Go runtime's soft memory limit: a size, 0 (none), or auto: unless GOMEMLIMIT is set, the listeners' server budgets (and --resume-memory) plus 128MiB, so that the collector's headroom does not double what the budgets hold (docs/rsocket.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if outBudget <= 0 || serverBudget <= 0 {
		return usageError(fs, "--outbound-budget and --server-outbound-budget must be above 0")
	}
	if *writeTimeout < 0 {
		return usageError(fs, "--write-timeout must not be negative (0: never)")
	}
	if len(listen) == 0 {
		return requireFlags(fs, "listen", "")
	}
	if err := checkMaxPayload(maxPayload); err != nil {
		return err
	}
	if *setupTimeout <= 0 || *frameStall <= 0 {
		return usageError(fs, "--setup-timeout and --frame-stall-timeout must be positive")
	}
	syncPolicy, err := seglog.ParseSyncPolicy(*resumeSync)
	if err != nil || *resumeSync == "" {
		return usageError(fs, "--resume-sync %q: want none, always or a duration", *resumeSync)
	}
	tlsCfg, err := rsocketd.ListenerTLS(listen, *tlsCert, *tlsKey, *tlsClientCA)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	log := logutil.NewLogger(stderr, *logLevel)
	memrelease.Start(ctx, log)
	retained := int64(0)
	if *resume || *resumeDir != "" {
		retained = int64(resumeMemory)
	}
	defer memLimit.Apply(len(listen), int64(serverBudget), retained, log)()
	reg := newRegistry()
	opts := []rsocket.Option{rsocket.WithLogger(log), rsocket.WithByteCredits(uint32(min(*byteCredits, frame.MaxRequestN))), rsocket.WithMaxPayloadSize(int(maxPayload)),
		rsocket.WithOutboundBudget(int(outBudget)), rsocket.WithServerOutboundBudget(int64(serverBudget)),
		rsocket.WithWriteTimeout(*writeTimeout), rsocket.WithSetupTimeout(*setupTimeout), rsocket.WithFrameStallTimeout(*frameStall)}
	if *lease {
		opts = append(opts, rsocket.WithLease(10*time.Second, 1000))
	}
	srv := rsocketd.New(rsocketd.Config{Listen: listen, TLS: tlsCfg, Options: opts, Resume: *resume,
		ResumeConfig: rsocket.ResumeConfig{BufferBytes: int(resumeBuffer), MaxRetainedBytes: int64(resumeMemory)},
		ResumeDir:    *resumeDir, ResumeSync: syncPolicy, Registry: reg, Logger: log})
	if err := serveMetrics(ctx, *metrics, reg, log, srv.Ready, nil); err != nil {
		return err
	}
	return srv.Run(ctx, stdout)
}

// checkMaxPayload refuses a --max-payload that is not a positive size
// (exit 2).
func checkMaxPayload(n byteSize) error {
	if n < 1 || n > 1<<31 {
		return &exitError{code: 2, msg: fmt.Sprintf("--max-payload %s: want 1B..2GiB", formatSize(int64(n)))}
	}
	return nil
}

// rsocketClient returns the run function of `sluice rsocket MODEL`.
func rsocketClient(model string) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		ctx, cancel := signalContext()
		defer cancel()
		return rsocketRequest(ctx, model, args, stdout, stderr)
	}
}

func rsocketRequest(ctx context.Context, model string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rsocket "+model, "--url tcp://HOST:PORT|tls://HOST:PORT|ws://HOST:PORT/PATH|wss://HOST:PORT/PATH [flags]", stderr)
	url := fs.String("url", "", "server URL: tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH; several, comma-separated, are load-balanced")
	tlsc := cli.AddRSocketTLS(fs)
	byteCredits := fs.Uint("byte-credits", 0, "offer the byte-credits extension, granting each stream this many bytes (docs/rsocket.md); 0: off")
	data := fs.String("data", "", "request data")
	metadata := fs.String("metadata", "", "request metadata (with --route: a text/plain entry of the composite metadata)")
	route := fs.String("route", "", "route, sent as composite metadata with message/x.rsocket.routing.v0")
	requestN := fs.Uint("request-n", 256, "stream/channel credits, granted again each time they are used up")
	setupData := fs.String("setup-data", "", "SETUP data")
	dataMIME := fs.String("data-mime", conn.DefaultDataMIME, "data MIME type (SETUP)")
	metadataMIME := fs.String("metadata-mime", conn.DefaultMetadataMIME, "metadata MIME type (SETUP)")
	keepalive := fs.Duration("keepalive", conn.DefaultKeepaliveInterval, "keepalive interval")
	lifetime := fs.Duration("lifetime", conn.DefaultMaxLifetime, "max lifetime without a frame from the server")
	resume := fs.Bool("resume", false, "resume the session through a broken connection: redial and replay what was lost (the server needs --resume)")
	maxPayload := byteSize(conn.DefaultMaxPayloadSize)
	fs.Var(&maxPayload, "max-payload", "largest payload (metadata + data) accepted from the server, whole or reassembled from fragments; a response over it fails the request")
	var hasData, hasMetadata bool
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		hasData = hasData || f.Name == "data"
		hasMetadata = hasMetadata || f.Name == "metadata"
	})
	if err := requireFlags(fs, "url", *url); err != nil {
		return err
	}
	if err := rsocketcall.CheckURLs(*url); err != nil {
		return usageError(fs, "%v", err)
	}
	switch {
	case model == "stream" && !hasData:
		// The echo responder (sluice rsocket serve) reads a stream's data
		// as its length; an empty one only earned its parse error.
		return usageError(fs, "--data is required: the stream request's data (sluice rsocket serve streams that many elements, e.g. --data 10)")
	case model == "push" && !hasMetadata && *route == "":
		return usageError(fs, "--metadata is required: a metadata push carries only metadata (or --route)")
	}
	if err := checkMaxPayload(maxPayload); err != nil {
		return err
	}
	if *requestN < 1 || *requestN > frame.MaxRequestN {
		return usageError(fs, "--request-n must be in 1..%d", frame.MaxRequestN)
	}
	md, err := rsocketcall.Metadata(*metadata, hasMetadata, *route)
	if err != nil {
		return usageError(fs, "--route: %v", err)
	}
	opts := []rsocket.Option{
		rsocket.WithMIME(*metadataMIME, *dataMIME),
		rsocket.WithKeepalive(*keepalive, *lifetime),
		rsocket.WithLogger(slog.New(slog.DiscardHandler)),
		rsocket.WithByteCredits(uint32(min(*byteCredits, frame.MaxRequestN))),
		rsocket.WithMaxPayloadSize(int(maxPayload)),
	}
	if *setupData != "" {
		opts = append(opts, rsocket.WithSetup(nil, []byte(*setupData)))
	}
	if *resume {
		opts = append(opts, rsocket.WithResume(rsocket.ResumeConfig{}))
	}
	topt, err := tlsc.Option(*url)
	if err != nil {
		return err
	}
	opts = append(opts, topt...)
	c, err := dialRSocketClient(ctx, *url, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	call := rsocketcall.Call{Model: model, Payload: rsocket.Payload{Metadata: md, Data: []byte(*data)}, HasData: hasData, N: uint32(*requestN), Stdin: rsocketStdin}
	return rsocketFailed(call.Do(ctx, c, stdout, stderr), stderr)
}

// rsocketFailed prints the server's ERROR alone on stderr (exit 1).
func rsocketFailed(err error, stderr io.Writer) error {
	var se *rsocketcall.ServerError
	if errors.As(err, &se) {
		fmt.Fprintln(stderr, se.Err.Message)
		return &exitError{code: 1}
	}
	return err
}
