package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// A remote-write record shows as exposition lines: name{labels} value
// timestamp, label values escaped, special floats spelled as Prometheus
// does; a plain record is ErrNotMarked.
func TestShowRemoteWrite(t *testing.T) {
	req := writeRequest("http_requests_total", `a"b\c`, 12.5, 1700000000123)
	req = append(req, writeRequest("up", "j", math.Inf(1), 5)...) // a second series
	got, err := Show(nil, marked(telemetry.RemoteWrite, req))
	if err != nil {
		t.Fatal(err)
	}
	want := `http_requests_total{job="a\"b\\c"} 12.5 1700000000123` + "\n" + `up{job="j"} +Inf 5`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := Show(nil, []byte("plain")); !errors.Is(err, telemetry.ErrNotMarked) {
		t.Errorf("plain record: %v, want ErrNotMarked", err)
	}
	if _, err := Show(nil, marked(telemetry.RemoteWrite, []byte{0x0a, 0x05, 0x01})); err == nil {
		t.Error("a truncated WriteRequest showed without error")
	}
}

// A remote-write record in the agent's columnar encoding shows as the
// protobuf record of the same request does, stale marker included; one
// cut short is an error (consume prints it as unreadable).
func TestShowRemoteWriteColumns(t *testing.T) {
	var req []byte
	for i := 1; i <= 20; i++ { // not 0: writeRequest writes a zero value out, which the encoding declines
		v := float64(i) / 4
		if i == 3 {
			v = math.Float64frombits(0x7ff0000000000002) // Prometheus' stale marker
		}
		req = append(req, writeRequest("up", fmt.Sprint("job-", i), v, 1700000000123)...)
	}
	rec := telemetry.AppendRemoteWrite(nil, req)
	if telemetry.Kind(rec[len(telemetry.Magic)+1]) != telemetry.RemoteWriteColumns {
		t.Fatal("the request was not stored in the columnar encoding")
	}
	got, err := Show(nil, rec)
	want, werr := Show(nil, marked(telemetry.RemoteWrite, req))
	if err != nil || werr != nil || string(got) != string(want) {
		t.Fatalf("columnar record shows\n%s (%v)\nprotobuf record\n%s (%v)", got, err, want, werr)
	}
	if _, err := Show(nil, rec[:len(rec)-2]); err == nil {
		t.Error("a damaged columnar record showed without error")
	}
}

// An OTLP record shows as the OTLP/JSON of its request, on one line.
func TestShowOTLP(t *testing.T) {
	req := &logsv1.LogsData{ResourceLogs: []*logsv1.ResourceLogs{{
		Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{{Key: "service.name",
			Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "checkout"}}}}},
		ScopeLogs: []*logsv1.ScopeLogs{{LogRecords: []*logsv1.LogRecord{{SeverityText: "WARN",
			Body: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "card declined"}}}}}},
	}}}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Show(nil, marked(telemetry.OTLPLogs, body))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ResourceLogs []struct {
			Resource  struct{ Attributes []struct{ Key string } }
			ScopeLogs []struct {
				LogRecords []struct {
					SeverityText string
					Body         struct{ StringValue string }
				}
			}
		}
	}
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if len(v.ResourceLogs) != 1 || v.ResourceLogs[0].Resource.Attributes[0].Key != "service.name" ||
		v.ResourceLogs[0].ScopeLogs[0].LogRecords[0].Body.StringValue != "card declined" {
		t.Errorf("JSON %s does not hold the request", got)
	}
	for _, c := range got {
		if c == '\n' {
			t.Fatalf("JSON over several lines: %s", got)
		}
	}
	if _, err := Show(nil, marked(telemetry.OTLPLogs, []byte{0x0a, 0xff})); err == nil {
		t.Error("a truncated OTLP request showed without error")
	}
}

// decodeWriteRequest refuses a field of the wrong wire type and a group.
func TestDecodeWriteRequestMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"timeseries as varint": protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 3),
		"group":                protowire.AppendTag(nil, 5, protowire.StartGroupType),
		"truncated":            {0x0a, 0x10, 0x01},
	} {
		err := decodeWriteRequest(b, func(*series) error { return nil })
		if !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want errMalformed", name, err)
		}
	}
}

// Traces show as OTLP/JSON: ids in hex, enums as numbers.
func TestShowOTLPTracesHexIDs(t *testing.T) {
	req := &tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{{
		TraceId: []byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c},
		SpanId:  []byte{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}, Name: "GET /", Kind: tracev1.Span_SPAN_KIND_SERVER,
	}}}}}}}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Show(nil, marked(telemetry.OTLPTraces, body))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"traceId":"5b8efff798038103d269b633813fc60c"`, `"spanId":"eee19b7ec3c1b174"`, `"kind":2`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
}
