package collect_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// otelPython is the venv interop/otel-py/setup.sh installs the SDK in.
func otelPython(t *testing.T) string {
	venv := os.Getenv("SLUICE_OTEL_PY_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "sluice", "otel-py")
	}
	py := filepath.Join(venv, "bin", "python")
	if err := exec.Command(py, "-c", "import opentelemetry.exporter.otlp.proto.grpc.trace_exporter").Run(); err != nil {
		testskip.Missing(t, "SLUICE_OTEL", "OpenTelemetry Python SDK", "the OTel Python SDK is not installed: run interop/otel-py/setup.sh")
	}
	return py
}

// TestOTelSDK: the OpenTelemetry Python SDK's own OTLP exporters (HTTP
// with protobuf and gzip; gRPC with gzip) send a span, a log record in
// it and a counter to the agent; each arrives in the sink's store as its
// kind, with its resource, names, values and attributes as sent.
func TestOTelSDK(t *testing.T) {
	py := otelPython(t)
	script, err := filepath.Abs("../../../interop/otel-py/send.py")
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t)
	for _, tc := range []struct{ proto, endpoint string }{
		{"http", "http://" + p.httpAddr},
		{"grpc", p.grpcAddr},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			marker := fmt.Sprintf("%s-%d", tc.proto, os.Getpid())
			out, err := exec.Command(py, script, tc.proto, tc.endpoint, marker).CombinedOutput()
			if err != nil {
				t.Fatalf("send.py %s: %v\n%s", tc.proto, err, out)
			}
			var got sdkRun
			p.waitFor(t, "the SDK's span, log and counter in the sink's store", func(stored []marked) bool {
				got = collectRun(t, stored, marker)
				return got.span != nil && got.log != nil && got.point != nil
			})
			checkSDKRun(t, got, marker)
		})
	}
}

// sdkRun is what one run of send.py left in the store.
type sdkRun struct {
	span                       *tracepb.Span
	log                        *logspb.LogRecord
	point                      *metricspb.NumberDataPoint
	spanRes, logRes, metricRes *resourcepb.Resource
	metricName                 string
	monotonic                  bool
}

// collectRun finds the items of the run marked marker among stored.
func collectRun(t *testing.T, stored []marked, marker string) sdkRun {
	var run sdkRun
	for _, m := range stored {
		switch m.kind {
		case telemetry.OTLPTraces:
			var req coltracepb.ExportTraceServiceRequest
			unmarshal(t, m.body, &req)
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						if attr(s.Attributes, "sluice.marker").GetStringValue() == marker {
							run.span, run.spanRes = s, rs.Resource
						}
					}
				}
			}
		case telemetry.OTLPLogs:
			var req collogspb.ExportLogsServiceRequest
			unmarshal(t, m.body, &req)
			for _, rl := range req.ResourceLogs {
				for _, sl := range rl.ScopeLogs {
					for _, l := range sl.LogRecords {
						if attr(l.Attributes, "sluice.marker").GetStringValue() == marker {
							run.log, run.logRes = l, rl.Resource
						}
					}
				}
			}
		case telemetry.OTLPMetrics:
			var req colmetricspb.ExportMetricsServiceRequest
			unmarshal(t, m.body, &req)
			for _, rm := range req.ResourceMetrics {
				for _, sm := range rm.ScopeMetrics {
					for _, mt := range sm.Metrics {
						for _, dp := range mt.GetSum().GetDataPoints() {
							if attr(dp.Attributes, "sluice.marker").GetStringValue() == marker {
								run.point, run.metricRes, run.metricName, run.monotonic = dp, rm.Resource, mt.Name, mt.GetSum().IsMonotonic
							}
						}
					}
				}
			}
		}
	}
	return run
}

// checkSDKRun compares, attribute for attribute, what arrived with what
// send.py sent.
func checkSDKRun(t *testing.T, run sdkRun, marker string) {
	t.Helper()
	for what, res := range map[string]*resourcepb.Resource{"span": run.spanRes, "log": run.logRes, "metric": run.metricRes} {
		if attr(res.GetAttributes(), "service.name").GetStringValue() != "sluice-otel-test" || attr(res.GetAttributes(), "sluice.marker").GetStringValue() != marker {
			t.Errorf("the %s's resource: %v", what, res)
		}
	}
	s := run.span
	if s.Name != "checkout" || len(s.TraceId) != 16 || len(s.SpanId) != 8 ||
		attr(s.Attributes, "order.items").GetIntValue() != 3 || attr(s.Attributes, "order.total").GetDoubleValue() != 12.5 ||
		!attr(s.Attributes, "order.paid").GetBoolValue() || s.EndTimeUnixNano < s.StartTimeUnixNano || s.StartTimeUnixNano == 0 {
		t.Errorf("span: %v", s)
	}
	l := run.log
	if l.Body.GetStringValue() != "order placed "+marker || l.SeverityNumber != logspb.SeverityNumber_SEVERITY_NUMBER_WARN ||
		attr(l.Attributes, "order.items").GetIntValue() != 3 || !bytes.Equal(l.TraceId, s.TraceId) || !bytes.Equal(l.SpanId, s.SpanId) {
		t.Errorf("log record (in span %x/%x): %v", s.TraceId, s.SpanId, l)
	}
	if run.metricName != "orders" || !run.monotonic || run.point.GetAsInt() != 3 || attr(run.point.Attributes, "route").GetStringValue() != "/checkout" {
		t.Errorf("counter %q (monotonic %t): %v", run.metricName, run.monotonic, run.point)
	}
}

func unmarshal(t *testing.T, b []byte, m proto.Message) {
	t.Helper()
	if err := proto.Unmarshal(b, m); err != nil {
		t.Fatalf("a stored %T does not decode: %v", m, err)
	}
}

// attr is the value of key among kvs (nil when absent).
func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}
