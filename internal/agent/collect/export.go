package collect

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/agent/ingest"
)

// What the OTLP/gRPC receiver (internal/agent/collect/otlpgrpc) needs of
// a Receiver: gRPC stays out of this package, as it stays in the
// transports everywhere else (internal/docs TestOnlyTransportsImportGRPC).

// Signal names an OTLP signal for ExportOTLP.
type Signal int

// The OTLP signals.
const (
	Metrics Signal = iota
	Logs
	Traces
)

// ExportOTLP spools one decoded OTLP Export…ServiceRequest of signal s,
// as the HTTP endpoints spool a body, and counts it under endpoint. Its
// error is Permanent when no retry can succeed.
func (rc *Receiver) ExportOTLP(ctx context.Context, endpoint string, s Signal, req proto.Message) error {
	sig := signals[s]
	body, err := proto.Marshal(req)
	if err == nil {
		var records [][]byte
		if records, err = splitRecords(body, sig.kind, rc.cfg.MaxRecordBytes); err == nil {
			err = rc.spool(ctx, sig.kind.String(), records)
		}
	}
	switch {
	case err == nil:
		rc.count(endpoint, "OK")
	case Permanent(err):
		rc.count(endpoint, "InvalidArgument")
	default:
		rc.count(endpoint, "Unavailable")
		rc.log.Warn("OTLP/gRPC request not spooled", "path", sig.path, "err", err)
	}
	return err
}

// Permanent tells an ExportOTLP error that no retry can fix (a request
// that cannot be encoded, a resource over --max-record) from one that a
// later retry may get through (the spool full or failing, the agent
// stopping).
func Permanent(err error) bool {
	return errors.Is(err, errMalformed) || errors.Is(err, ingest.ErrRecordTooLarge)
}

// Authorize checks the values of a request's Authorization header (or
// gRPC "authorization" metadata) against the ingest tokens; nil when
// none are set.
func (rc *Receiver) Authorize(values []string) error {
	if rc.cfg.Tokens == nil {
		return nil
	}
	return ingest.CheckBearer(rc.cfg.Tokens, values)
}

// CountRefused counts a request to endpoint refused before ExportOTLP
// saw it (code: a gRPC code's name).
func (rc *Receiver) CountRefused(endpoint, code string) { rc.count(endpoint, code) }

// BodyIdleTimeout is how long a request's body may send nothing: the
// gRPC server pings a connection quiet this long.
func (rc *Receiver) BodyIdleTimeout() time.Duration { return rc.cfg.BodyIdleTimeout }
