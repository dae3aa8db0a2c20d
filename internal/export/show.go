package export

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	metricsv1 "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// Show appends the readable form of rec to dst when rec is a marked
// record: an OTLP request as one line of OTLP/JSON (what an OTLP/HTTP
// JSON endpoint takes), a remote-write request as one line per sample in the
// Prometheus text exposition format (name{labels} value timestamp_ms).
// It returns telemetry.ErrNotMarked for a plain record, which the caller
// prints as it is, and another error for a marked record it cannot read.
// Lines are separated by '\n', with no newline after the last one.
func Show(dst, rec []byte) ([]byte, error) {
	kind, body, err := telemetry.Decode(rec)
	if err != nil {
		return dst, err
	}
	if kind == telemetry.RemoteWrite {
		return showRemoteWrite(dst, body)
	}
	// MetricsData, LogsData and TracesData have the layout of the
	// Export…ServiceRequest of their signal (one repeated field 1), so
	// their JSON is the request's: {"resourceMetrics": [...]}. The
	// collector packages that hold the requests themselves pull in a
	// gRPC gateway the sink has no use for.
	var m proto.Message
	switch kind {
	case telemetry.OTLPMetrics:
		m = &metricsv1.MetricsData{}
	case telemetry.OTLPLogs:
		m = &logsv1.LogsData{}
	default:
		m = &tracev1.TracesData{}
	}
	if err := proto.Unmarshal(body, m); err != nil {
		return dst, fmt.Errorf("%v record: %w", kind, err)
	}
	// OTLP/JSON is protojson with enums as numbers and trace and span ids
	// in hex (not base64): what a user can post to an OTLP/HTTP JSON
	// endpoint as it is.
	js, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(m)
	if err == nil {
		js, err = hexIDs(js) // exemplars of metrics have ids too
	}
	if err != nil {
		return dst, fmt.Errorf("%v record: %w", kind, err)
	}
	return append(dst, js...), nil
}

// idFields are the OTLP fields that OTLP/JSON writes in hex.
var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// hexIDs rewrites the base64 trace and span ids protojson wrote as hex.
func hexIDs(js []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if err := walkIDs(v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // a log line's "<" stays "<"
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

func walkIDs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && idFields[k] {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
				v[k] = hex.EncodeToString(b)
				continue
			}
			if err := walkIDs(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := walkIDs(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// showRemoteWrite appends one exposition line per sample of body.
func showRemoteWrite(dst, body []byte) ([]byte, error) {
	first := true
	nl := func() {
		if !first {
			dst = append(dst, '\n')
		}
		first = false
	}
	err := decodeWriteRequest(body, func(s *series) error {
		for _, smp := range s.samples {
			nl()
			dst = appendSeries(dst, s.labels)
			dst = append(dst, ' ')
			dst = appendValue(dst, smp.value)
			dst = append(dst, ' ')
			dst = strconv.AppendInt(dst, smp.timestamp, 10)
		}
		if s.histograms > 0 {
			nl()
			dst = append(dst, "# "...)
			dst = appendSeries(dst, s.labels)
			dst = fmt.Appendf(dst, " has %d native histogram samples (not shown)", s.histograms)
		}
		return nil
	})
	if err != nil {
		return dst, errors.Join(errors.New("remote-write record"), err)
	}
	return dst, nil
}

// appendSeries appends name{label="value",...}: the __name__ label as
// the name, the others in the order the request has them.
func appendSeries(dst []byte, labels []label) []byte {
	for _, l := range labels {
		if l.name == "__name__" {
			dst = append(dst, l.value...)
		}
	}
	dst = append(dst, '{')
	n := 0
	for _, l := range labels {
		if l.name == "__name__" {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, l.name...)
		dst = append(dst, '=', '"')
		dst = append(dst, labelEscaper.Replace(l.value)...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// labelEscaper escapes a label value as the text format does.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// appendValue appends v as the text format writes floats.
func appendValue(dst []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}
