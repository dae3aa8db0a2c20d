package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/memrelease"
	"github.com/sluicehq/sluice/internal/progress"
	"github.com/sluicehq/sluice/internal/status"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/openstore"
	"github.com/sluicehq/sluice/internal/xfer/s3store"
	"github.com/sluicehq/sluice/internal/xfer/send"
	"github.com/sluicehq/sluice/internal/xfer/serve"
)

func init() {
	register("xfer serve", "receive files into a directory over gRPC, RSocket and tus (resumable, verified, atomic)", runXferServe)
	register("xfer send", "send a file to `sluice xfer serve`, resuming from the server's offset", runXferSend)
}

func runXferServe(args []string, stdout, stderr io.Writer) error {
	ctx, cancel := signalContext()
	defer cancel()
	return xferServe(ctx, args, stdout, stderr)
}

// xferServe runs `sluice xfer serve` until ctx ends. It prints
// "listening TRANSPORT ADDRESS" on stdout for each transport, with the
// port resolved.
func xferServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("xfer serve", "--dir DIR | --store s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT[&region=R] [--grpc HOST:PORT] [--rsocket tcp://HOST:PORT] [--tus HOST:PORT] [--http HOST:PORT] [--max-size SIZE] [--expire D] [--idle-timeout D] [--max-partials N] [--metrics HOST:PORT] [--log-level LEVEL]", stderr)
	dir := fs.String("dir", "", "directory completed uploads land in (partial ones under DIR/.partial)")
	storeURL := fs.String("store", "", "keep uploads in an S3 object store instead of --dir: s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT[&region=R], credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; any server on the same store resumes any upload")
	grpcAddr := fs.String("grpc", "", "serve the gRPC Xfer service on HOST:PORT")
	rsAddr := fs.String("rsocket", "", "serve RSocket on tcp://HOST:PORT")
	tusAddr := fs.String("tus", "", "serve tus 1.0.0 at http://HOST:PORT/files/")
	httpAddr := fs.String("http", "", "serve a whole file per POST at http://HOST:PORT/post/NAME (no resume)")
	var maxSize byteSize
	fs.Var(&maxSize, "max-size", "refuse uploads larger than this, e.g. 10GiB (0: no limit)")
	expire := fs.Duration("expire", 24*time.Hour, "remove partial uploads idle for longer (--store: abort their multipart uploads), and finished tus uploads' records (HEAD answers them until then) this long after they finished (0: never)")
	idle := fs.Duration("idle-timeout", diskstore.DefaultIdleTimeout, "end a tus PATCH whose body sends nothing for this long, freeing its upload")
	maxPartials := fs.Int("max-partials", diskstore.DefaultMaxPartials, "keep at most this many partial uploads in --dir (a new one beyond it removes the one idle the longest; its client starts again), and as many finished tus uploads' records")
	metrics := fs.String("metrics", "", status.MetricsHelp(true, "", ""))
	logLevel := cliflag.LogLevel(fs, "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	loc, err := storeFlags(fs, *dir, *storeURL)
	if err != nil {
		return err
	}
	if err := checkServeLimits(*maxPartials, *idle, *expire); err != nil {
		return err
	}
	if *grpcAddr == "" && *rsAddr == "" && *tusAddr == "" && *httpAddr == "" {
		return &exitError{code: 2, msg: "give at least one of --grpc, --rsocket, --tus, --http"}
	}
	// Every address checked before the store opens (and creates --dir):
	// a port in use ends it with nothing on disk (issue 24). serve.Start
	// binds them again, a moment later.
	rsHost := strings.TrimPrefix(*rsAddr, "tcp://")
	for _, l := range []struct{ flag, addr string }{{"--grpc", *grpcAddr}, {"--rsocket", rsHost}, {"--tus", *tusAddr}, {"--metrics", *metrics}} {
		if l.addr == "" || strings.HasSuffix(l.addr, ":0") {
			continue
		}
		lis, err := cli.ListenFlag(l.flag, l.addr)
		if err != nil {
			return err
		}
		lis.Close()
	}
	log := logutil.NewLogger(stderr, *logLevel)
	memrelease.Start(ctx, log)
	st, err := openstore.Open(openstore.Config{Dir: *dir, S3: loc, Options: diskstore.Options{MaxSize: int64(maxSize), Expire: *expire, IdleTimeout: *idle, MaxPartials: *maxPartials, Log: log}})
	if err != nil {
		return err
	}
	defer st.Close()
	reg := newRegistry()
	diskstore.RegisterStats(reg, st.Backend.Counters())
	page := status.Config{Kind: status.KindXfer}
	if st.Disk != nil {
		page.Providers = []status.Provider{status.Uploads(st.Disk)}
	}
	if err := serveMetrics(ctx, *metrics, reg, log, st.Ready, nil, page); err != nil {
		return err
	}
	srv, err := serve.Start(st.Backend, serve.Listen{GRPC: *grpcAddr, RSocket: *rsAddr, TUS: *tusAddr, HTTP: *httpAddr, Log: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	for _, u := range srv.Addrs.URLs() {
		fmt.Fprintln(stdout, "listening", u)
	}
	log.Info("xfer serving", "store", st.Where, "max_size", int64(maxSize), "expire", *expire)
	var err2 error
	select {
	case <-ctx.Done():
	case err2 = <-srv.Err():
	}
	// One line at the end, so that an operator sees what the run did and
	// what it leaves for the next server on this directory or store.
	log.Info("xfer serve stopping", st.Summary()...)
	return err2
}

// checkServeLimits refuses limits xfer serve cannot work with (exit 2).
func checkServeLimits(maxPartials int, idle, expire time.Duration) error {
	switch {
	case maxPartials <= 0:
		return &exitError{code: 2, msg: "--max-partials must be positive"}
	case idle <= 0:
		return &exitError{code: 2, msg: "--idle-timeout must be positive"}
	case expire < 0:
		return &exitError{code: 2, msg: "--expire must be positive, or 0 (never)"}
	}
	return nil
}

// storeFlags checks that exactly one of --dir and --store is given, and
// parses --store's URL (the zero Location for --dir).
func storeFlags(fs *flag.FlagSet, dir, store string) (s3store.Location, error) {
	switch {
	case dir != "" && store != "":
		return s3store.Location{}, usageError(fs, "give --dir or --store, not both")
	case store == "":
		return s3store.Location{}, requireFlags(fs, "dir (a directory) or --store (s3://BUCKET)", dir)
	}
	loc, err := s3store.ParseURL(store)
	if err != nil {
		return loc, usageError(fs, "%v", err)
	}
	return loc, nil
}

// chunkFlag is --chunk: a size, or auto (0).
type chunkFlag int

func (c *chunkFlag) String() string {
	if *c == 0 {
		return "auto"
	}
	return formatSize(int64(*c))
}

func (c *chunkFlag) Set(s string) error {
	if s == "auto" {
		*c = 0
		return nil
	}
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	if n < 1 || n > send.MaxTUSChunk {
		return fmt.Errorf("chunk size %s out of range (1B .. %s for gRPC and RSocket, %s for tus, or auto)", s, formatSize(xfer.MaxChunk), formatSize(send.MaxTUSChunk))
	}
	*c = chunkFlag(n)
	return nil
}

// autoChunkHelp says what --chunk auto picks, from xfer's constants.
func autoChunkHelp() string {
	return fmt.Sprintf("auto: %s for gRPC, %s for RSocket, %s for tus",
		humanSize(send.AutoChunk), humanSize(send.AutoRSocketChunk), humanSize(send.AutoTUSChunk))
}

func runXferSend(args []string, stdout, stderr io.Writer) error {
	ctx, cancel := signalContext()
	defer cancel()
	return xferSend(ctx, args, stdout, stderr)
}

func xferSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("xfer send", "FILE --to grpc://HOST:PORT | tcp://HOST:PORT | http://HOST:PORT/files/ [--name NAME] [--chunk SIZE|auto] [flags]", stderr)
	to := fs.String("to", "", "server: grpc://HOST:PORT, tcp://HOST:PORT (RSocket) or http://HOST:PORT/files/ (tus)")
	name := fs.String("name", "", "name on the server (default: FILE's base name)")
	var chunk chunkFlag
	fs.Var(&chunk, "chunk", "chunk size (tus: PATCH size), or "+autoChunkHelp()+" (the default)")
	var rate byteSize
	fs.Var(&rate, "rate", "send at most this many bytes per second, e.g. 10MiB (0: no limit)")
	attempts := fs.Int("attempts", 20, "how often to resume after a retryable failure before giving up")
	sha := fs.String("sha256", "", "FILE's SHA-256 in hex, when you have it (a manifest): FILE is then read once and not hashed; the server still hashes what it receives and refuses the file if the two differ")
	logLevel := cliflag.LogLevel(fs, "warn", "debug, info, warn or error")
	// FILE may come before or after the flags.
	var files []string
	for rest := args; ; {
		if err := parseFlagsArgs(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		return usageError(fs, "give exactly one FILE")
	}
	if err := requireFlags(fs, "to", *to); err != nil {
		return err
	}
	if err := send.CheckChunk(*to, int(chunk)); err != nil {
		return usageError(fs, "--chunk %s: %v", chunk.String(), err)
	}
	o := send.Options{Name: *name, Chunk: int(chunk), Attempts: *attempts, Rate: int64(rate), Log: logutil.NewLogger(stderr, *logLevel)}
	if *sha != "" {
		b, err := hex.DecodeString(*sha)
		if err != nil || len(b) != sha256.Size {
			return usageError(fs, "--sha256 %q: want 64 hex digits", *sha)
		}
		o.SHA256 = b
	}
	var bar *progress.Bar
	if progress.IsTerminal(stderr) {
		bar = progress.NewBar(stderr)
		o.Progress = bar.Update
	}
	sum, err := send.File(ctx, *to, files[0], o)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, hex.EncodeToString(sum))
	return nil
}
