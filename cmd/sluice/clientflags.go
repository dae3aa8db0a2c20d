package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/agent"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// clientFlags are the transport and credential flags of every command that
// connects to a sink (agent, consume).
type clientFlags struct {
	caFile, certFile, keyFile, serverName string
	token, tokenFile                      string
	insecureToken                         bool
}

func (f *clientFlags) register(fs *flag.FlagSet) {
	// The agent's table entries: every other command that connects to a
	// sink (consume) has the same defaults, all empty.
	d := flagDefs{fs, defaults.Agent}
	d.String(&f.caFile, "tls-ca", "connect with TLS, trusting this CA bundle (PEM)")
	d.String(&f.certFile, "tls-cert", "client certificate for mTLS (PEM)")
	d.String(&f.keyFile, "tls-key", "client key for mTLS (PEM)")
	d.String(&f.serverName, "tls-server-name", "expected server name (default: the host of the address)")
	d.String(&f.token, "token", "bearer token identifying this client to the sink")
	d.String(&f.tokenFile, "token-file", "read the bearer token from this file")
	d.Bool(&f.insecureToken, "insecure-token", "allow sending the token without TLS (loopback testing only)")
}

// bearerToken is --token, or the trimmed content of --token-file.
func (f *clientFlags) bearerToken() (string, error) {
	if f.tokenFile == "" {
		return f.token, nil
	}
	b, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// transport turns the flags into how a client reaches a sink.
func (f *clientFlags) transport() (grpctransport.ClientOptions, error) {
	var o grpctransport.ClientOptions
	if f.caFile != "" || f.certFile != "" {
		cfg, err := auth.ClientTLS(f.caFile, f.certFile, f.keyFile, f.serverName)
		if err != nil {
			return o, err
		}
		o.TLS = cfg
	}
	tok, err := f.bearerToken()
	if err != nil {
		return o, err
	}
	if tok != "" && o.TLS == nil && !f.insecureToken {
		return o, errors.New("a token without TLS would travel in clear text: add --tls-ca, or --insecure-token for loopback tests")
	}
	o.Token, o.AllowTokenWithoutTLS = tok, f.insecureToken
	return o, nil
}

// agentIDFor returns the agent id to use given --agent-id (flagID, may be
// empty) and the client certificate file (may be empty). With mutual TLS
// the sink takes the agent id from the certificate and refuses a Hello
// naming another, so the agent uses the certificate's id by default and
// refuses at startup an --agent-id the sink would refuse on every connect.
func agentIDFor(flagID, certFile string) (string, error) {
	if certFile == "" {
		return flagID, nil
	}
	id, err := auth.CertFileIdentity(certFile)
	switch {
	case errors.As(err, new(*fs.PathError)):
		return "", err
	case err != nil:
		return "", fmt.Errorf("--tls-cert %s: %w", certFile, err)
	case id.AgentID == auth.ReaderID:
		return "", fmt.Errorf("--tls-cert %s is a reader's certificate, not an agent's", certFile)
	case flagID != "" && flagID != id.AgentID:
		return "", fmt.Errorf("--agent-id %q differs from the id %q that --tls-cert %s binds; the sink would refuse every connection", flagID, id.AgentID, certFile)
	}
	return id.AgentID, nil
}

// liveFlags bound how long an agent waits on a sink that stopped
// answering, and how fast it moves on (see internal/agent/health.go).
type liveFlags struct {
	reconnectMax, handshake, progress, keepalive time.Duration
}

func (f *liveFlags) register(fs *flag.FlagSet) {
	d := flagDefs{fs, defaults.Agent}
	d.Duration(&f.reconnectMax, "reconnect-max", fmt.Sprintf("longest wait between reconnection attempts (jittered exponential back-off from %v, each attempt to the next --sink)", defaults.ReconnectMin))
	d.Duration(&f.handshake, "handshake-timeout", "give up on a sink that does not answer the handshake within this long")
	d.Duration(&f.progress, "progress-timeout", "drop a stream on which messages are in flight and no ack came for this long")
	d.Duration(&f.keepalive, "keepalive-timeout", fmt.Sprintf("drop a connection whose keepalive ping (sent after %v without traffic) is unanswered this long", defaults.KeepaliveTime))
}

func (f *liveFlags) apply(cfg *agent.Config) error {
	if f.reconnectMax < defaults.MinReconnectMax || f.handshake <= 0 || f.progress <= 0 || f.keepalive <= 0 {
		return fmt.Errorf("--reconnect-max must be at least %v; --handshake-timeout, --progress-timeout and --keepalive-timeout positive", defaults.MinReconnectMax)
	}
	cfg.ReconnectMin = min(defaults.ReconnectMin, f.reconnectMax)
	cfg.ReconnectMax, cfg.HandshakeTimeout, cfg.ProgressTimeout, cfg.KeepaliveTimeout = f.reconnectMax, f.handshake, f.progress, f.keepalive
	return nil
}
