package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/memrelease"
	"github.com/sluicehq/sluice/internal/status"
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
	compression, dictFile, level string
	rsocketResume                bool
	changeAgentID                bool
	window                       string
	spoolSync                    string
	minRTO                       time.Duration
	agentID                      string
	deadLetterAt                 string
}

func (f *agentFlags) register(fs *flag.FlagSet) {
	d := flagDefs{fs, defaults.Agent}
	d.Size(&f.maxMessage, "max-message", "largest uncompressed message (records are packed up to it); at most "+formatSize(defaults.MaxMessage))
	d.Size(&f.maxRecord, "max-record", "largest record (default: what fits in a message)")
	d.Size(&f.quota, "spool-quota", fmt.Sprintf("spool size on disk at which ingest answers 507 (at least %s and four messages; spool segments are an eighth of it, within %s-%s)",
		formatSize(defaults.MinSpoolQuota), formatSize(defaults.SpoolSegmentMin), formatSize(defaults.SpoolSegmentMax)))
	d.Duration(&f.linger, "linger", "how long a message waits for more records")
	d.String(&f.compression, "compression", "plain, zstd, or dict (zstd with --dict)")
	d.String(&f.dictFile, "dict", "trained zstd dictionary file (see sluice dict train); implies --compression dict")
	d.String(&f.level, "compression-level", "zstd effort: default, fastest (agents short of CPU) or better (short of bandwidth)")
	d.String(&f.window, "window", "in-flight messages: auto (bandwidth-delay product) or a number")
	d.String(&f.spoolSync, "spool-sync", "spool durability: always (fsync before answering ingest), none, or an interval")
	d.Duration(&f.minRTO, "min-rto", "lower bound of the adaptive resend timeout")
	d.String(&f.deadLetterAt, "dead-letter-at", "spool size on disk from which messages the sink refused for good are copied to SPOOL/dead-letter and their room freed (sluice dead-letter list): a size, or a share of --spool-quota such as 50%; a disk with less free space than the spool holds sets them aside at any size")
	d.String(&f.agentID, "agent-id", "this agent's id at the sink, as named in the sink's tokens file (default: the id kept in the spool, created on first start); a spool never changes its id")
	d.Bool(&f.changeAgentID, "change-agent-id", "let --agent-id replace the id of a spool that holds messages, whose unacknowledged messages then go to the sink under it: for a spool whose sink refuses its id as taken by another spool")
}

func (f *agentFlags) config(sink, spool string) (agent.Config, error) {
	cfg := agent.Config{SinkAddr: sink, SpoolDir: spool, MaxMessageBytes: int(f.maxMessage),
		MaxRecordBytes: int(f.maxRecord), SpoolQuota: int64(f.quota), Linger: f.linger, MinRTO: f.minRTO,
		AgentID: f.agentID}
	pol, err := seglog.ParseSyncPolicy(f.spoolSync)
	if err != nil {
		return cfg, fmt.Errorf("--spool-sync %q: want always, none, or an interval such as 100ms", f.spoolSync)
	}
	cfg.SpoolSync = pol
	cfg.RSocketResume, cfg.ChangeAgentID = f.rsocketResume, f.changeAgentID
	if cfg.Compression, err = codec.ParseAgentKind(f.compression); err != nil {
		return cfg, err
	}
	if cfg.CompressionLevel, err = codec.ParseLevel(f.level); err != nil {
		return cfg, fmt.Errorf("--compression-level: %w", err)
	}
	if f.dictFile != "" {
		d, err := codec.ReadDictionaryFile(f.dictFile)
		if err != nil {
			return cfg, fmt.Errorf("--dict: %w", err)
		}
		cfg.Dictionary, cfg.Compression = &d, codec.ZstdDict
	}
	if cfg.SpoolQuota < 1 {
		return cfg, fmt.Errorf("--spool-quota %s: want a positive size such as %s", formatSize(cfg.SpoolQuota), defaults.FormatSize(defaults.SpoolQuota))
	}
	// No "never": a message left parked holds the spool until it fills.
	if cfg.SetAsideAt, err = cliflag.ParseSizeOrShare(f.deadLetterAt, cfg.SpoolQuota); err != nil || cfg.SetAsideAt < 1 || cfg.SetAsideAt > cfg.SpoolQuota {
		return cfg, fmt.Errorf("--dead-letter-at %q: want a size up to --spool-quota (%s), or a share of it such as 50%%", f.deadLetterAt, formatSize(cfg.SpoolQuota))
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

// agentCmd holds the flags of `sluice agent`.
type agentCmd struct {
	sink, spool, ingest, otlpGRPC       string
	ingestCert, ingestKey, ingestTokens string
	metricsAddr, logLevel, configFile   string
	stallTimeout                        time.Duration
	af                                  agentFlags
	cf                                  clientFlags
	lf                                  liveFlags
}

// newAgentFlags registers every flag of `sluice agent`, with the defaults
// of internal/defaults.
func newAgentFlags(stderr io.Writer) (*flag.FlagSet, *agentCmd) {
	fs := newFlags("agent", "--sink HOST:PORT|rsocket+tcp://HOST:PORT --spool DIR [--config FILE] [flags]", stderr)
	c := &agentCmd{}
	d := flagDefs{fs, defaults.Agent}
	d.String(&c.sink, "sink", "the sink's address: HOST:PORT (gRPC), rsocket+tcp://HOST:PORT or rsocket+ws://HOST:PORT/PATH (RSocket); several, comma-separated, to fail over between sinks sharing a Kafka topic")
	d.String(&c.spool, "spool", "spool directory (created if missing)")
	d.String(&c.ingest, "ingest", "address of the ingest HTTP API (POST /v1/records, Prometheus remote-write on /api/v1/write, OTLP/HTTP on /v1/metrics, /v1/logs, /v1/traces)")
	d.String(&c.otlpGRPC, "otlp-grpc", "also serve OTLP/gRPC (metrics, logs, traces) on this address, with the ingest TLS and tokens (empty: off)")
	d.Duration(&c.stallTimeout, "stall-timeout", "end a collector's request (--otlp-grpc message; remote-write or OTLP/HTTP body) that holds "+formatSize(defaults.StallBytes)+"+ and got less than that more of it in this time")
	d.String(&c.ingestCert, "ingest-tls-cert", "serve ingest over HTTPS with this certificate (PEM); needs --ingest-tls-key")
	d.String(&c.ingestKey, "ingest-tls-key", "key of --ingest-tls-cert (PEM)")
	d.String(&c.ingestTokens, "ingest-tokens", "require \"Authorization: Bearer TOKEN\" on ingest, with tokens from this file (lines \"TOKEN CLIENT_NAME\"); 401 otherwise")
	d.String(&c.metricsAddr, "metrics", status.MetricsHelp(true, "127.0.0.1:9401", "--ingest-tokens"))
	cliflag.LogLevelVar(fs, &c.logLevel, "log-level", defaults.LogLevel, "debug, info, warn or error")
	d.configFlag(&c.configFile)
	c.af.register(fs)
	// Not in demo, whose agent and sink talk gRPC in one process.
	d.Bool(&c.af.rsocketResume, "rsocket-resume", "resume RSocket connections to rsocket+ sinks: a broken connection is dialled again and the session goes on, nothing resent (the sink needs --rsocket-resume)")
	c.cf.register(fs)
	c.lf.register(fs)
	return fs, c
}

func runAgent(args []string, stdout, stderr io.Writer) error {
	fs, c := newAgentFlags(stderr)
	if err := parseDaemonFlags(fs, args, &c.configFile, defaults.Agent); err != nil {
		return err
	}
	if err := requireFlags(fs, "sink", c.sink, "spool", c.spool); err != nil {
		return err
	}
	log := logutil.NewLogger(stderr, c.logLevel)
	cfg, ingestTLS, err := c.config(log)
	if err != nil {
		return err
	}
	reg := newRegistry()
	cfg.Logger, cfg.Registry = log, reg
	// Every listener first: a port in use ends the agent before it
	// creates a spool and an agent id (issue 24).
	lis, err := cli.ListenFlag("--ingest", c.ingest)
	if err != nil {
		return err
	}
	defer lis.Close()
	var otlpLis net.Listener
	if c.otlpGRPC != "" {
		if otlpLis, err = cli.ListenFlag("--otlp-grpc", c.otlpGRPC); err != nil {
			return err
		}
		defer otlpLis.Close()
	}
	var metricsLis net.Listener
	if c.metricsAddr != "" {
		if metricsLis, err = cli.ListenFlag("--metrics", c.metricsAddr); err != nil {
			return err
		}
		defer metricsLis.Close()
	}
	ctx, stop := signalContext()
	defer stop()
	memrelease.Start(ctx, log)
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	quota := cfg.SpoolQuota
	if quota == 0 {
		quota = defaults.SpoolQuota
	}
	serveMetricsOn(ctx, metricsLis, reg, log, a.Ready, a.Healthy, status.Config{Kind: status.KindAgent,
		Tokens: cfg.IngestTokens, Providers: []status.Provider{status.SpoolQuota(quota),
			status.LastError(a.LastError)}})
	if err := a.ServeListeners(ctx, lis, otlpLis, ingestTLS); err != nil {
		return err
	}
	log.Info("shutting down; unacknowledged messages stay in the spool")
	return a.Close()
}

// config is the agent.Config the flags describe, with the ingest
// listener's TLS, its tokens and the client credentials loaded (errors
// exit 2).
func (c *agentCmd) config(log *slog.Logger) (cfg agent.Config, ingestTLS *tls.Config, err error) {
	cfg, err = c.af.config(c.sink, c.spool)
	if err != nil {
		return cfg, nil, &exitError{code: 2, msg: err.Error()}
	}
	if cfg.GRPC, err = c.cf.transport(); err != nil {
		return cfg, nil, &exitError{code: 2, msg: err.Error()}
	}
	if cfg.AgentID, err = agentIDFor(cfg.AgentID, c.cf.certFile); err != nil {
		return cfg, nil, &exitError{code: 2, msg: err.Error()}
	}
	if c.stallTimeout <= 0 {
		return cfg, nil, &exitError{code: 2, msg: "--stall-timeout must be positive"}
	}
	cfg.StallTimeout = c.stallTimeout
	if (c.ingestCert == "") != (c.ingestKey == "") {
		return cfg, nil, &exitError{code: 2, msg: "--ingest-tls-cert and --ingest-tls-key go together"}
	}
	if c.ingestCert != "" {
		if ingestTLS, err = auth.ServerTLS(c.ingestCert, c.ingestKey, ""); err != nil {
			return cfg, nil, &exitError{code: 2, msg: err.Error()}
		}
	}
	if c.ingestTokens != "" {
		if cfg.IngestTokens, err = auth.LoadTokens(c.ingestTokens); err != nil {
			return cfg, nil, &exitError{code: 2, msg: err.Error()}
		}
		if ingestTLS == nil {
			log.Warn("ingest tokens travel in clear text without --ingest-tls-cert; use this on loopback only")
		}
	}
	if err := c.lf.apply(&cfg); err != nil {
		return cfg, nil, &exitError{code: 2, msg: err.Error()}
	}
	return cfg, ingestTLS, nil
}
