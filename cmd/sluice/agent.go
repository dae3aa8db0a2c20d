package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/seglog"
)

func init() {
	register("agent", "spool records locally and deliver them to a sink over one stream", runAgent)
	register("produce", "send lines from stdin or a file to an agent; exit 0 once all are spooled", runProduce)
}

// agentFlags are the flags that configure an agent, shared by `agent` and
// the embedded agent of `demo`.
type agentFlags struct {
	maxMessage, maxRecord, quota byteSize
	linger                       time.Duration
	compression, dictFile        string
	window                       string
	spoolSync                    string
	minRTO                       time.Duration
	agentID                      string
}

func (f *agentFlags) register(fs *flag.FlagSet) {
	f.maxMessage = agent.DefaultMaxMessageBytes
	fs.Var(&f.maxMessage, "max-message", "largest uncompressed message (records are packed up to it); at most 4MiB")
	fs.Var(&f.maxRecord, "max-record", "largest record (default: what fits in a message)")
	f.quota = 1 << 30
	fs.Var(&f.quota, "spool-quota", "spool size on disk at which ingest answers 507 (at least 2MiB and four messages; spool segments are an eighth of it, within 1-64MiB)")
	fs.DurationVar(&f.linger, "linger", 5*time.Millisecond, "how long a message waits for more records")
	fs.StringVar(&f.compression, "compression", "zstd", "plain, zstd, or dict (zstd with --dict)")
	fs.StringVar(&f.dictFile, "dict", "", "trained zstd dictionary file (see sluice dict train); implies --compression dict")
	fs.StringVar(&f.window, "window", "auto", "in-flight messages: auto (bandwidth-delay product) or a number")
	fs.StringVar(&f.spoolSync, "spool-sync", "always", "spool durability: always (fsync before answering ingest), none, or an interval")
	fs.DurationVar(&f.minRTO, "min-rto", time.Second, "lower bound of the adaptive resend timeout")
	fs.StringVar(&f.agentID, "agent-id", "", "this agent's id at the sink, as named in the sink's tokens file (default: the id kept in the spool, created on first start); a spool never changes its id")
}

func (f *agentFlags) config(sink, spool string) (agent.Config, error) {
	cfg := agent.Config{SinkAddr: sink, SpoolDir: spool, MaxMessageBytes: int(f.maxMessage),
		MaxRecordBytes: int(f.maxRecord), SpoolQuota: int64(f.quota), Linger: f.linger, MinRTO: f.minRTO,
		AgentID: f.agentID}
	pol, err := seglog.ParseSyncPolicy(f.spoolSync)
	if err != nil {
		return cfg, err
	}
	cfg.SpoolSync = pol
	switch f.compression {
	case "plain":
		cfg.Compression = codec.Plain
	case "zstd":
		cfg.Compression = codec.Zstd
	case "dict":
		cfg.Compression = codec.ZstdDict
	default:
		return cfg, fmt.Errorf("--compression %q: want plain, zstd or dict", f.compression)
	}
	if f.dictFile != "" {
		data, err := os.ReadFile(f.dictFile)
		if err != nil {
			return cfg, err
		}
		d, err := codec.ParseDictionary(data)
		if err != nil {
			return cfg, fmt.Errorf("--dict %s: %w", f.dictFile, err)
		}
		cfg.Dictionary, cfg.Compression = &d, codec.ZstdDict
	}
	if f.window != "auto" {
		n, err := strconv.Atoi(f.window)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("--window %q: want auto or a positive number", f.window)
		}
		cfg.MaxInFlightMsgs = n
	}
	return cfg, nil
}

func runAgent(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agent", "--sink HOST:PORT --spool DIR [flags]", stderr)
	sink := fs.String("sink", "", "the sink's address, HOST:PORT; several, comma-separated, to fail over between sinks sharing a Kafka topic")
	spool := fs.String("spool", "", "spool directory (created if missing)")
	ingest := fs.String("ingest", "127.0.0.1:7401", "address of the ingest HTTP API (POST /v1/records)")
	ingestCert := fs.String("ingest-tls-cert", "", "serve ingest over HTTPS with this certificate (PEM); needs --ingest-tls-key")
	ingestKey := fs.String("ingest-tls-key", "", "key of --ingest-tls-cert (PEM)")
	ingestTokens := fs.String("ingest-tokens", "", "require \"Authorization: Bearer TOKEN\" on ingest, with tokens from this file (lines \"TOKEN CLIENT_NAME\"); 401 otherwise")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9401)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var af agentFlags
	af.register(fs)
	var cf clientFlags
	cf.register(fs)
	var lf liveFlags
	lf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sink == "" || *spool == "" {
		return &exitError{code: 2, msg: "--sink and --spool are required"}
	}
	log := newLogger(stderr, *logLevel)
	cfg, err := af.config(*sink, *spool)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if cfg.DialOptions, err = cf.dialOptions(); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	if (*ingestCert == "") != (*ingestKey == "") {
		return &exitError{code: 2, msg: "--ingest-tls-cert and --ingest-tls-key go together"}
	}
	var ingestTLS *tls.Config
	if *ingestCert != "" {
		if ingestTLS, err = auth.ServerTLS(*ingestCert, *ingestKey, ""); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
	}
	if *ingestTokens != "" {
		if cfg.IngestTokens, err = auth.LoadTokens(*ingestTokens); err != nil {
			return &exitError{code: 2, msg: err.Error()}
		}
		if ingestTLS == nil {
			log.Warn("ingest tokens travel in clear text without --ingest-tls-cert; use this on loopback only")
		}
	}
	if err := lf.apply(&cfg); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	reg := newRegistry()
	cfg.Logger, cfg.Registry = log, reg
	ctx, stop := signalContext()
	defer stop()
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := serveMetrics(ctx, *metricsAddr, reg, log, a.Ready); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *ingest)
	if err != nil {
		return err
	}
	if ingestTLS != nil {
		lis = tls.NewListener(lis, ingestTLS)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("ingest listening", "addr", lis.Addr().String(), "agent_id", a.ID(),
		"tls", ingestTLS != nil, "tokens", cfg.IngestTokens != nil)
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("shutting down; unacknowledged messages stay in the spool")
	return a.Close()
}
