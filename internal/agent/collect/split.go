// Package collect receives what existing collectors send — Prometheus
// remote-write and OTLP over HTTP; OTLP over gRPC through otlpgrpc — on
// the agent, and spools each request as marked records
// (internal/telemetry), so that the sink's exporters can forward it in
// the same protocol. A request is answered
// with success only once its records are fsynced in the spool, and with a
// retryable status while the spool is full or failing, so the collector
// keeps the data until the agent has it.
//
// The decoding and splitting here are pure functions of the body; the
// HTTP handlers (and otlpgrpc's services) read, spool and answer.
package collect

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// errMalformed: the body is not a valid request of its protocol (400;
// the collector drops it, so it must mean only that).
var errMalformed = errors.New("malformed request")

// splitRecords turns one request's protobuf body into marked records of
// kind k, each at most maxRecord bytes (remote-write ones in the
// columnar encoding where it round-trips: appendRecord). A body that fits
// is one record; a larger one is cut between its top-level fields
// (remote-write: time series and metadata; OTLP: resources), which keeps
// every piece a valid request of the same message type, because protobuf
// concatenates repeated fields. A single field too large for a record is
// ingest.ErrRecordTooLarge: nothing of the request is kept. An empty body
// gives no records.
func splitRecords(body []byte, k telemetry.Kind, maxRecord int) ([][]byte, error) {
	if len(body) == 0 {
		return nil, nil
	}
	room := maxRecord - telemetry.HeaderLen
	if len(body) <= room {
		return [][]byte{appendRecord(k, body)}, nil
	}
	var out [][]byte
	start, end := 0, 0 // body[start:end] is the pending piece
	for end < len(body) {
		_, _, n := protowire.ConsumeField(body[end:])
		if n < 0 {
			return nil, fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		if n > room {
			return nil, fmt.Errorf("%w: one %s element of %d bytes, limit %d (raise --max-message; --max-record follows it)", ingest.ErrRecordTooLarge, unitName(k), n, room)
		}
		if end+n-start > room {
			out = append(out, appendRecord(k, body[start:end]))
			start = end
		}
		end += n
	}
	return append(out, appendRecord(k, body[start:end])), nil
}

// appendRecord is the marked record of kind k holding body: remote-write
// in the columnar encoding when it round-trips (telemetry.AppendRemoteWrite),
// which is never longer than the protobuf, so the cuts above hold.
func appendRecord(k telemetry.Kind, body []byte) []byte {
	if k == telemetry.RemoteWrite {
		return telemetry.AppendRemoteWrite(nil, body)
	}
	return telemetry.Append(nil, k, body)
}

// unitName is what one top-level field of a request of kind k holds.
func unitName(k telemetry.Kind) string {
	if k == telemetry.RemoteWrite {
		return "time series"
	}
	return "resource"
}

// walkFields calls f for every field of the protobuf message b, after
// checking its wire format; val is the field's bytes for the bytes type
// (a nested message or a string), nil otherwise.
func walkFields(b []byte, f func(num protowire.Number, typ protowire.Type, val []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(m))
		}
		var val []byte
		if typ == protowire.BytesType {
			val, _ = protowire.ConsumeBytes(b[n:])
		}
		if err := f(num, typ, val); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}
