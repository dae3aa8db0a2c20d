package agent

import (
	"context"
	"crypto/tls"
	"net"
)

// ServeListeners serves what `sluice agent` listens for until ctx ends:
// OTLP/gRPC on otlpLis (nil: none) and the ingest endpoint on lis, both
// through tlsCfg when it is set. It returns once both have shut down, the
// ingest endpoint's failure first.
func (a *Agent) ServeListeners(ctx context.Context, lis, otlpLis net.Listener, tlsCfg *tls.Config) error {
	tokens := a.cfg.IngestTokens != nil
	log := a.cfg.Logger // without the agent attribute a.log adds: the ingest line names the id
	otlpDone := make(chan error, 1)
	if otlpLis != nil {
		log.Info("OTLP/gRPC listening", "addr", otlpLis.Addr().String(), "tls", tlsCfg != nil, "tokens", tokens)
		go func() { otlpDone <- a.ServeOTLPGRPC(ctx, otlpLis, tlsCfg) }()
	} else {
		otlpDone <- nil
	}
	if tlsCfg != nil {
		lis = tls.NewListener(lis, tlsCfg)
	}
	log.Info("ingest listening", "addr", lis.Addr().String(), "agent_id", a.ID(), "tls", tlsCfg != nil, "tokens", tokens)
	if err := a.ServeIngest(ctx, lis); err != nil {
		return err
	}
	return <-otlpDone
}
