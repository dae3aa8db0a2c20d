package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/export"
	"github.com/sluicehq/sluice/internal/logutil"
	"github.com/sluicehq/sluice/internal/memrelease"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/status"
	"github.com/sluicehq/sluice/internal/transport/grpctransport/grpcserve"
	"github.com/sluicehq/sluice/internal/transport/rsockettransport"
)

func init() {
	register("sink", "receive agents' messages into a durable store and serve them to consumers", runSink)
}

// sinkCmd holds the flags of `sluice sink`.
type sinkCmd struct {
	listen, data, store, metrics, logLevel, configFile string
	listenRSocket                                      string
	rsocketResume                                      bool
	tlsCert, tlsKey, clientCA, tokens                  string
	queueMsgs, maxStreams, maxConns, maxConsumers      int
	queueBytes, maxMessage                             byteSize
	helloTimeout, kafkaStart, stallTimeout             time.Duration
	handshakeTimeout, keepaliveTime, keepaliveTimeout  time.Duration
	maxConnsTotal, maxConsumersPerPeer                 int
	// export is every --export value, targets them parsed (check).
	export  listFlag
	targets []export.Target
}

// newSinkFlags registers every flag of `sluice sink`, with the defaults of
// internal/defaults.
func newSinkFlags(stderr io.Writer) (*flag.FlagSet, *sinkCmd) {
	fs := newFlags("sink", "--listen HOST:PORT --data DIR [--store kafka://HOST:PORT/TOPIC] [--config FILE] [flags]", stderr)
	c := &sinkCmd{}
	d := flagDefs{fs, defaults.Sink}
	d.String(&c.listen, "listen", "address to serve the gRPC service on, HOST:PORT (required)")
	d.String(&c.listenRSocket, "listen-rsocket", "also serve the delivery protocol over RSocket at tcp://HOST:PORT or ws://HOST:PORT/PATH (same TLS and tokens as gRPC)")
	d.Bool(&c.rsocketResume, "rsocket-resume", "keep RSocket sessions through a broken connection until the agent resumes them (agents need --rsocket-resume)")
	d.String(&c.data, "data", "data directory: the store, dictionaries, group offsets and the dedup checkpoint (required)")
	d.String(&c.store, "store", "where messages are stored: embedded (a log in --data), or\n"+
		"kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?partitions=N&replication=N&compression=C&headers=H]: one Kafka record per record,\n"+
		"acked once Kafka (acks=all) has them; the topic is created if missing (partitions default 1,\n"+
		"replication default min(3, brokers)); record batches compressed with C: zstd (default), lz4, snappy or none;\n"+
		"headers=four writes the four headers of sinks before the one 'sluice' header, for a topic they still write to")
	d.String(&c.metrics, "metrics", status.MetricsHelp(true, "127.0.0.1:9400", "--tokens"))
	d.String(&c.tlsCert, "tls-cert", "serve TLS with this certificate (PEM); needs --tls-key")
	d.String(&c.tlsKey, "tls-key", "key of --tls-cert (PEM)")
	d.String(&c.clientCA, "client-ca", "require client certificates signed by these CAs (PEM): mutual TLS")
	d.String(&c.tokens, "tokens", "require a bearer token on every call; file of \"TOKEN AGENT_ID\" lines, AGENT_ID * for consumers")
	d.Int(&c.queueMsgs, "queue-messages", "messages each agent stream may have queued for storage (its credit)")
	d.Size(&c.queueBytes, "queue-bytes", "payload bytes each agent stream may have queued for storage")
	d.Size(&c.maxMessage, "max-message", "largest message accepted, uncompressed; at most "+formatSize(defaults.SinkMaxMessageLimit))
	d.Int(&c.maxStreams, "max-streams-per-conn", "concurrent streams one connection may open (each agent or consumer needs 1; a gRPC client queues those beyond, silently)")
	d.Int(&c.maxConnsTotal, "max-conns", "open gRPC connections from all addresses together; more are closed at once")
	d.Int(&c.maxConns, "max-conns-per-peer", "connections from one IP address not yet past a Hello (after it, one session per agent id); more are closed at once")
	d.Int(&c.maxConsumers, "max-consumers", "Read streams served at once; more are refused (ResourceExhausted)")
	d.Int(&c.maxConsumersPerPeer, "max-consumers-per-peer", "Read streams served at once from one IP address, whatever its connections; more are refused (ResourceExhausted)")
	d.Duration(&c.handshakeTimeout, "handshake-timeout", "close a connection that has not finished its TLS and HTTP/2 handshake within this time")
	d.Duration(&c.keepaliveTime, "keepalive-time", "ping a connection that has been quiet this long")
	d.Duration(&c.keepaliveTimeout, "keepalive-timeout", "close a connection whose keepalive ping is unanswered this long")
	d.Duration(&c.helloTimeout, "hello-timeout", "end a stream that has not sent its Hello (or ReadStart) within this time")
	d.Duration(&c.stallTimeout, "stall-timeout", "close a connection whose stream holds "+formatSize(defaults.StallBytes)+"+ of a message and sent less than that more of it in this time")
	d.Duration(&c.kafkaStart, "kafka-start-timeout", "with a Kafka store, how long to keep trying to reach the brokers at startup")
	fs.Var(&c.export, "export", "forward the records collectors sent (Prometheus remote-write, OTLP) to a backend, `PROTOCOL=URL`:\n"+
		"remote-write=URL (a remote-write receiver) or otlp=URL (an OTLP/HTTP receiver; /v1/metrics, /v1/logs,\n"+
		"/v1/traces are added); repeatable; each keeps its own position in the store (docs/export.md)")
	cliflag.LogLevelVar(fs, &c.logLevel, "log-level", defaults.LogLevel, "debug, info, warn or error")
	d.configFlag(&c.configFile)
	return fs, c
}

func runSink(args []string, stdout, stderr io.Writer) error {
	fs, c := newSinkFlags(stderr)
	if err := parseDaemonFlags(fs, args, &c.configFile, defaults.Sink); err != nil {
		return err
	}
	if err := c.check(fs); err != nil {
		return err
	}
	log := logutil.NewLogger(stderr, c.logLevel)
	cfg, err := c.config(log)
	if err != nil {
		return err
	}
	// Every listener first: a port in use ends the sink before it opens
	// (or creates) its store (issue 24).
	lis, metricsLis, err := c.bind()
	if err != nil {
		return err
	}
	s, err := sink.New(cfg)
	if err != nil {
		lis.Close()
		if metricsLis != nil {
			metricsLis.Close()
		}
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	memrelease.Start(ctx, log)
	exp := export.StartGroup(s, c.targets, cfg.Registry, log)
	defer exp.Stop()
	page := status.Config{Kind: status.KindSink, Tokens: cfg.Tokens, Full: auth.Identity.CanRead,
		Providers: []status.Provider{status.AgentRows(s.Agents), status.LastError(s.LastError), status.Exporters(exp.Status)}}
	if st := s.Store(); st != nil {
		page.Providers = append(page.Providers, status.StoreSize(st.Dir()))
	}
	serveMetricsOn(ctx, metricsLis, cfg.Registry, log, s.Ready, nil, page)
	served := make(chan error, 1)
	go func() { served <- grpcserve.Serve(s.Serving(), lis) }()
	rsCtx, rsStop := context.WithCancel(context.Background())
	defer rsStop()
	if c.listenRSocket != "" {
		var opts []rsockettransport.Option
		if cfg.TLS != nil {
			opts = append(opts, rsockettransport.WithTLS(cfg.TLS))
		}
		if c.rsocketResume {
			opts = append(opts, rsockettransport.WithResume())
		}
		a, err := rsockettransport.Start(rsCtx, c.listenRSocket, s, served, opts...)
		if err != nil {
			exp.Stop()
			s.Close()
			return fmt.Errorf("--listen-rsocket: %w", err)
		}
		log.Info("sink listening for RSocket", "url", c.listenRSocket, "addr", a.String(), "tls", cfg.TLS != nil)
	}
	log.Info("sink listening", "addr", lis.Addr().String(), "data", c.data, "store", c.store, "tls", cfg.TLS != nil,
		"mtls", c.clientCA != "", "tokens", cfg.Tokens != nil)
	return s.RunUntil(ctx, served, exp.Stop, rsStop)
}

// check refuses flags that cannot work together (exit 2).
func (c *sinkCmd) check(fs *flag.FlagSet) error {
	switch {
	case c.listen == "" || c.data == "":
		return requireFlags(fs, "listen", c.listen, "data", c.data)
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return &exitError{code: 2, msg: "--tls-cert and --tls-key go together"}
	case c.clientCA != "" && c.tlsCert == "":
		return &exitError{code: 2, msg: "--client-ca needs --tls-cert and --tls-key"}
	case c.queueMsgs < 1 || c.queueBytes < 1 || c.maxMessage < 1:
		return &exitError{code: 2, msg: "--queue-messages, --queue-bytes and --max-message must be positive"}
	case c.maxStreams < 1 || c.maxConns < 1 || c.maxConsumers < 1 || c.helloTimeout <= 0 || c.kafkaStart <= 0 || c.stallTimeout <= 0:
		return &exitError{code: 2, msg: "--max-streams-per-conn, --max-conns-per-peer, --max-consumers, --hello-timeout, --stall-timeout and --kafka-start-timeout must be positive"}
	}
	if c.maxConnsTotal < 1 || c.maxConsumersPerPeer < 1 || c.handshakeTimeout <= 0 || c.keepaliveTime <= 0 || c.keepaliveTimeout <= 0 {
		return &exitError{code: 2, msg: "--max-conns, --max-consumers-per-peer, --handshake-timeout, --keepalive-time and --keepalive-timeout must be positive"}
	}
	if err := sink.CheckStore(c.store); err != nil {
		return &exitError{code: 2, msg: "--store: " + err.Error()}
	}
	if _, err := rsockettransport.CheckListenURL(c.listenRSocket); err != nil && c.listenRSocket != "" {
		return &exitError{code: 2, msg: "--listen-rsocket: " + err.Error()}
	}
	targets, err := export.ParseTargets(c.export)
	if err != nil {
		return &exitError{code: 2, msg: "--export: " + err.Error()}
	}
	if len(targets) > 0 && c.store != "" && c.store != "embedded" {
		return &exitError{code: 2, msg: "--export needs the embedded store (exporters read the store by position; a Kafka topic is read by Kafka's own consumers)"}
	}
	c.targets = targets
	return nil
}

// config is the sink.Config the flags describe, with TLS and tokens loaded.
func (c *sinkCmd) config(log *slog.Logger) (sink.Config, error) {
	cfg := sink.Config{
		DataDir: c.data, Store: c.store, QueueMessages: c.queueMsgs, QueueBytes: int64(c.queueBytes), MaxMessageBytes: int64(c.maxMessage),
		Logger: log, Registry: newRegistry(),
		MaxStreamsPerConn: c.maxStreams, MaxConnsPerPeer: c.maxConns, MaxConsumers: c.maxConsumers, MaxConsumersPerPeer: c.maxConsumersPerPeer,
		HelloTimeout: c.helloTimeout, KafkaStartTimeout: c.kafkaStart, StallTimeout: c.stallTimeout,
		HandshakeTimeout: c.handshakeTimeout, KeepaliveTime: c.keepaliveTime, KeepaliveTimeout: c.keepaliveTimeout,
	}
	cfg.MaxConns = c.maxConnsTotal
	if c.tlsCert != "" {
		t, err := auth.ServerTLS(c.tlsCert, c.tlsKey, c.clientCA)
		if err != nil {
			return cfg, err
		}
		cfg.TLS = t
	}
	if c.tokens != "" {
		t, err := auth.LoadTokens(c.tokens)
		if err != nil {
			return cfg, err
		}
		cfg.Tokens = t
		if cfg.TLS == nil {
			log.Warn("tokens without TLS travel in clear text; use --tls-cert and --tls-key beyond loopback tests")
		}
	}
	return cfg, nil
}

// bind binds --listen and --metrics, and checks --listen-rsocket's port
// (rsockettransport.Start binds it later: in use now, in use later).
func (c *sinkCmd) bind() (lis, metricsLis net.Listener, err error) {
	if lis, err = cli.ListenFlag("--listen", c.listen); err != nil {
		return nil, nil, err
	}
	if c.metrics != "" {
		if metricsLis, err = cli.ListenFlag("--metrics", c.metrics); err != nil {
			lis.Close()
			return nil, nil, err
		}
	}
	if c.listenRSocket != "" {
		if u, perr := url.Parse(c.listenRSocket); perr == nil && u.Host != "" {
			l, err := cli.ListenFlag("--listen-rsocket", u.Host)
			if err != nil {
				lis.Close()
				if metricsLis != nil {
					metricsLis.Close()
				}
				return nil, nil, err
			}
			l.Close()
		}
	}
	return lis, metricsLis, nil
}
