package main

import (
	"errors"
	"flag"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
)

// clientFlags are the transport and credential flags of every command that
// connects to a sink (agent, consume).
type clientFlags struct {
	caFile, certFile, keyFile, serverName string
	token, tokenFile                      string
	insecureToken                         bool
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.caFile, "tls-ca", "", "connect with TLS, trusting this CA bundle (PEM)")
	fs.StringVar(&f.certFile, "tls-cert", "", "client certificate for mTLS (PEM)")
	fs.StringVar(&f.keyFile, "tls-key", "", "client key for mTLS (PEM)")
	fs.StringVar(&f.serverName, "tls-server-name", "", "expected server name (default: the host of the address)")
	fs.StringVar(&f.token, "token", "", "bearer token identifying this client to the sink")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from this file")
	fs.BoolVar(&f.insecureToken, "insecure-token", false, "allow sending the token without TLS (loopback testing only)")
}

// dialOptions turns the flags into gRPC dial options.
func (f *clientFlags) dialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	useTLS := f.caFile != "" || f.certFile != ""
	if useTLS {
		cfg, err := auth.ClientTLS(f.caFile, f.certFile, f.keyFile, f.serverName)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	tok := f.token
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, err
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok != "" {
		if !useTLS && !f.insecureToken {
			return nil, errors.New("a token without TLS would travel in clear text: add --tls-ca, or --insecure-token for loopback tests")
		}
		opts = append(opts, grpc.WithPerRPCCredentials(auth.NewBearer(tok, !useTLS)))
	}
	return opts, nil
}

// liveFlags bound how long an agent waits on a sink that stopped
// answering, and how fast it moves on (see internal/agent/health.go).
type liveFlags struct {
	reconnectMax, handshake, progress, keepalive time.Duration
}

func (f *liveFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.reconnectMax, "reconnect-max", 5*time.Second, "longest wait between reconnection attempts (jittered exponential back-off from 100ms, each attempt to the next --sink)")
	fs.DurationVar(&f.handshake, "handshake-timeout", agent.DefaultHandshakeTimeout, "give up on a sink that does not answer the handshake within this long")
	fs.DurationVar(&f.progress, "progress-timeout", agent.DefaultProgressTimeout, "drop a stream on which messages are in flight and no ack came for this long")
	fs.DurationVar(&f.keepalive, "keepalive-timeout", agent.DefaultKeepaliveTimeout, "drop a connection whose keepalive ping (sent after 10s without traffic) is unanswered this long")
}

func (f *liveFlags) apply(cfg *agent.Config) error {
	if f.reconnectMax < 10*time.Millisecond || f.handshake <= 0 || f.progress <= 0 || f.keepalive <= 0 {
		return errors.New("--reconnect-max must be at least 10ms; --handshake-timeout, --progress-timeout and --keepalive-timeout positive")
	}
	cfg.ReconnectMin = min(100*time.Millisecond, f.reconnectMax)
	cfg.ReconnectMax, cfg.HandshakeTimeout, cfg.ProgressTimeout, cfg.KeepaliveTimeout = f.reconnectMax, f.handshake, f.progress, f.keepalive
	return nil
}
