package main

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/sink"
)

func init() {
	register("sink", "receive agents' messages into a durable store and serve them to consumers", runSink)
}

func runSink(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sink", "--listen HOST:PORT --data DIR [--store kafka://HOST:PORT/TOPIC] [flags]", stderr)
	listen := fs.String("listen", "", "address to serve the gRPC service on, HOST:PORT (required)")
	data := fs.String("data", "", "data directory: the store, dictionaries, group offsets and the dedup checkpoint (required)")
	store := fs.String("store", "embedded", "where messages are stored: embedded (a log in --data), or\n"+
		"kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?partitions=N&replication=N]: one Kafka record per record,\n"+
		"acked once Kafka (acks=all) has them; the topic is created if missing (partitions default 1,\n"+
		"replication default min(3, brokers))")
	metrics := fs.String("metrics", "", "serve Prometheus metrics at http://ADDR/metrics")
	tlsCert := fs.String("tls-cert", "", "serve TLS with this certificate (PEM); needs --tls-key")
	tlsKey := fs.String("tls-key", "", "key of --tls-cert (PEM)")
	clientCA := fs.String("client-ca", "", "require client certificates signed by these CAs (PEM): mutual TLS")
	tokens := fs.String("tokens", "", "require a bearer token on every call; file of \"TOKEN AGENT_ID\" lines, AGENT_ID * for consumers")
	queueMsgs := fs.Int("queue-messages", sink.DefaultQueueMessages, "messages each agent stream may have queued for storage (its credit)")
	queueBytes := byteSize(sink.DefaultQueueBytes)
	fs.Var(&queueBytes, "queue-bytes", "payload bytes each agent stream may have queued for storage")
	maxMessage := byteSize(sink.DefaultMaxMessageBytes)
	fs.Var(&maxMessage, "max-message", "largest message accepted, uncompressed")
	maxStreams := fs.Int("max-streams-per-conn", sink.DefaultMaxStreamsPerConn, "concurrent streams one connection may open (an agent needs 1)")
	maxConns := fs.Int("max-conns-per-peer", sink.DefaultMaxConnsPerPeer, "open connections one IP address may hold; more are closed at once")
	maxConsumers := fs.Int("max-consumers", sink.DefaultMaxConsumers, "Read streams served at once; more are refused (ResourceExhausted)")
	helloTimeout := fs.Duration("hello-timeout", sink.DefaultHelloTimeout, "end a stream that has not sent its Hello (or ReadStart) within this time")
	kafkaStart := fs.Duration("kafka-start-timeout", sink.DefaultKafkaStartTimeout, "with a Kafka store, how long to keep trying to reach the brokers at startup")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *listen == "" || *data == "":
		fs.Usage()
		return &exitError{code: 2, msg: "--listen and --data are required"}
	case (*tlsCert == "") != (*tlsKey == ""):
		return &exitError{code: 2, msg: "--tls-cert and --tls-key go together"}
	case *clientCA != "" && *tlsCert == "":
		return &exitError{code: 2, msg: "--client-ca needs --tls-cert and --tls-key"}
	case *queueMsgs < 1 || queueBytes < 1 || maxMessage < 1:
		return &exitError{code: 2, msg: "--queue-messages, --queue-bytes and --max-message must be positive"}
	case *maxStreams < 1 || *maxConns < 1 || *maxConsumers < 1 || *helloTimeout <= 0 || *kafkaStart <= 0:
		return &exitError{code: 2, msg: "--max-streams-per-conn, --max-conns-per-peer, --max-consumers, --hello-timeout and --kafka-start-timeout must be positive"}
	}
	if err := sink.CheckStore(*store); err != nil {
		return &exitError{code: 2, msg: "--store: " + err.Error()}
	}
	log := newLogger(stderr, *logLevel)
	cfg := sink.Config{
		DataDir: *data, Store: *store, QueueMessages: *queueMsgs, QueueBytes: int64(queueBytes), MaxMessageBytes: int64(maxMessage),
		Logger: log, Registry: newRegistry(),
		MaxStreamsPerConn: *maxStreams, MaxConnsPerPeer: *maxConns, MaxConsumers: *maxConsumers,
		HelloTimeout: *helloTimeout, KafkaStartTimeout: *kafkaStart,
	}
	if *tlsCert != "" {
		t, err := auth.ServerTLS(*tlsCert, *tlsKey, *clientCA)
		if err != nil {
			return err
		}
		cfg.TLS = t
	}
	if *tokens != "" {
		t, err := auth.LoadTokens(*tokens)
		if err != nil {
			return err
		}
		cfg.Tokens = t
		if cfg.TLS == nil {
			log.Warn("tokens without TLS travel in clear text; use --tls-cert and --tls-key beyond loopback tests")
		}
	}
	s, err := sink.New(cfg)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		s.Close()
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	if err := serveMetrics(ctx, *metrics, cfg.Registry, log, s.Ready); err != nil {
		lis.Close()
		s.Close()
		return fmt.Errorf("--metrics: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	log.Info("sink listening", "addr", lis.Addr().String(), "data", *data, "store", *store, "tls", cfg.TLS != nil,
		"mtls", *clientCA != "", "tokens", cfg.Tokens != nil)
	select {
	case <-ctx.Done():
		log.Info("shutting down: finishing the streams, storing what is queued")
	case err := <-served:
		// Serve only returns early when the listener fails.
		cerr := s.Close()
		return errors.Join(err, cerr)
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := <-served; err != nil {
		return err
	}
	log.Info("sink stopped")
	return nil
}
