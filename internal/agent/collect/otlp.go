package collect

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// signal is one OTLP signal: its HTTP path, the record kind it is stored
// as and its request and response messages.
type signal struct {
	path    string
	kind    telemetry.Kind
	newReq  func() proto.Message
	newResp func() proto.Message
}

var (
	metricsSignal = signal{"/v1/metrics", telemetry.OTLPMetrics,
		func() proto.Message { return new(colmetricspb.ExportMetricsServiceRequest) },
		func() proto.Message { return new(colmetricspb.ExportMetricsServiceResponse) }}
	logsSignal = signal{"/v1/logs", telemetry.OTLPLogs,
		func() proto.Message { return new(collogspb.ExportLogsServiceRequest) },
		func() proto.Message { return new(collogspb.ExportLogsServiceResponse) }}
	tracesSignal = signal{"/v1/traces", telemetry.OTLPTraces,
		func() proto.Message { return new(coltracepb.ExportTraceServiceRequest) },
		func() proto.Message { return new(coltracepb.ExportTraceServiceResponse) }}
	signals = []signal{metricsSignal, logsSignal, tracesSignal}
)

// decodeOTLP returns the protobuf body to store for an OTLP/HTTP request
// of signal s: a protobuf body as received once it decodes (the exporter
// forwards it byte for byte), a JSON body converted to protobuf.
func decodeOTLP(s signal, body []byte, isJSON bool) ([]byte, error) {
	msg := s.newReq()
	if !isJSON {
		if err := proto.Unmarshal(body, msg); err != nil {
			return nil, fmt.Errorf("%w: %v", errMalformed, err)
		}
		return body, nil
	}
	body, err := hexIDsToBase64(body)
	if err != nil {
		return nil, err
	}
	// Unknown fields are ignored, as the OTLP spec asks of receivers (a
	// newer sender's additions).
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, msg); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	out, err := proto.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	return out, nil
}

// idKeys are the OTLP/JSON fields that hold trace and span ids. The OTLP
// spec encodes them in hex, where protojson, following the protobuf JSON
// mapping for bytes, expects base64 (and would take most hex strings for
// base64 of a wrong length without complaint).
var idKeys = []string{"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}

// hexIDsToBase64 rewrites the hex trace and span ids of an OTLP/JSON body
// as base64, wherever they are nested.
func hexIDsToBase64(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep 64-bit integers exact through the round trip
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: JSON: %v", errMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: JSON: data after the request object", errMalformed)
	}
	if err := rewriteIDs(doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

func rewriteIDs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && s != "" && isIDKey(k) {
				id, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%w: %s %q is not hex", errMalformed, k, s)
				}
				v[k] = base64.StdEncoding.EncodeToString(id)
				continue
			}
			if err := rewriteIDs(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := rewriteIDs(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func isIDKey(k string) bool {
	for _, id := range idKeys {
		if k == id {
			return true
		}
	}
	return false
}
