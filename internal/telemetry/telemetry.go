// Package telemetry is how a record that came from a collector
// (Prometheus remote-write, OTLP) is marked in the store, so that the
// sink's exporters and `sluice consume` know what it holds and where it
// may go: records are otherwise opaque bytes, and a collector's request
// must come out of the sink as the same protocol's request.
//
// A marked record is the 4-byte Magic, a version byte, a Kind byte and
// the request's uncompressed protobuf body, as the protocol defines it
// (a remote-write WriteRequest, an OTLP Export…ServiceRequest) — or, for
// Kind RemoteWriteColumns, the WriteRequest in rwcodec's columnar
// encoding, which Decode turns back into the protobuf. A plain
// record (POST /v1/records) that happens to begin with Magic would be
// taken for a marked one; Magic starts with 0xFF, which no UTF-8 text
// does, so only binary records can collide.
package telemetry

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/telemetry/rwcodec"
)

// Magic begins every marked record.
const Magic = "\xffSLT"

// version is the layout after Magic; Decode refuses others.
const version = 1

// HeaderLen is the bytes Append puts before the body.
const HeaderLen = len(Magic) + 2

// Kind says which protocol's request a marked record holds.
type Kind byte

// The kinds of marked records. Values are stored: never renumber.
const (
	// RemoteWrite: a Prometheus remote-write 1.0 WriteRequest (protobuf,
	// not snappy-compressed).
	RemoteWrite Kind = 1
	// OTLPMetrics, OTLPLogs, OTLPTraces: an OTLP
	// ExportMetricsServiceRequest, ExportLogsServiceRequest or
	// ExportTraceServiceRequest (protobuf, even when it arrived as JSON).
	OTLPMetrics Kind = 2
	OTLPLogs    Kind = 3
	OTLPTraces  Kind = 4
	// RemoteWriteColumns: a remote-write 1.0 WriteRequest in rwcodec's
	// encoding (AppendRemoteWrite), which zstd compresses several times
	// better; Decode returns it as RemoteWrite with the protobuf body,
	// so only this package sees this kind.
	RemoteWriteColumns Kind = 5
)

// String names the kind as flags and metrics do.
func (k Kind) String() string {
	switch k {
	case RemoteWrite:
		return "remote-write"
	case OTLPMetrics:
		return "otlp-metrics"
	case OTLPLogs:
		return "otlp-logs"
	case OTLPTraces:
		return "otlp-traces"
	case RemoteWriteColumns:
		return "remote-write-columns"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// ErrNotMarked: the record is not a marked record (a plain record).
var ErrNotMarked = errors.New("telemetry: not a marked record")

// Append appends the marked record of kind k holding body to dst.
func Append(dst []byte, k Kind, body []byte) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, version, byte(k))
	return append(dst, body...)
}

// AppendRemoteWrite appends the marked record holding the remote-write
// WriteRequest body to dst: in rwcodec's encoding (RemoteWriteColumns)
// when that gives body back exactly and is smaller, else as it is
// (RemoteWrite). Either way the record is no longer than Append's.
func AppendRemoteWrite(dst, body []byte) []byte {
	enc, ok := rwcodec.Encode(body)
	if !ok {
		return Append(dst, RemoteWrite, body)
	}
	return Append(dst, RemoteWriteColumns, enc)
}

// Decode returns the kind and the body of a marked record;
// ErrNotMarked for a plain one, another error for a marked record of a
// version or kind this build does not know, or a RemoteWriteColumns
// record that does not decode. The body aliases rec, except for a
// RemoteWriteColumns record: that is returned as kind RemoteWrite, its
// body the decoded protobuf in new memory.
func Decode(rec []byte) (Kind, []byte, error) {
	if len(rec) < HeaderLen || string(rec[:len(Magic)]) != Magic {
		return 0, nil, ErrNotMarked
	}
	if v := rec[len(Magic)]; v != version {
		return 0, nil, fmt.Errorf("telemetry: marked record of version %d (this build reads %d)", v, version)
	}
	k := Kind(rec[len(Magic)+1])
	switch {
	case k < RemoteWrite || k > RemoteWriteColumns:
		return 0, nil, fmt.Errorf("telemetry: marked record of unknown %v", k)
	case k == RemoteWriteColumns:
		body, err := rwcodec.Decode(rec[HeaderLen:])
		if err != nil {
			return 0, nil, fmt.Errorf("telemetry: %v record: %w", k, err)
		}
		return RemoteWrite, body, nil
	}
	return k, rec[HeaderLen:], nil
}
