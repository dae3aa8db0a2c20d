package collect

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/agent/ingest"
	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/spooltest"
)

// defaultMaxRecord is the agent's --max-record by default: what fits in
// a message of the default size.
const defaultMaxRecord = int(defaults.AgentMaxMessage) - ingest.BatchOverhead

// serve starts the HTTP endpoints over a fake spool, with mod applied to
// the default Config.
func serve(t *testing.T, mod func(*Config)) (*spooltest.Recorder, *httptest.Server) {
	t.Helper()
	fs := &spooltest.Recorder{}
	cfg := Config{Ingest: fs.Ingest, MaxRecordBytes: defaultMaxRecord}
	if mod != nil {
		mod(&cfg)
	}
	mux := http.NewServeMux()
	New(cfg).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return fs, srv
}

// label, sample and series build remote-write messages by hand, as
// Prometheus' generated code lays them out.
func label(name, value string) []byte {
	var b []byte
	b = protowire.AppendTag(b, labelName, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, labelValue, protowire.BytesType)
	return protowire.AppendString(b, value)
}

func series(name string, samples int) []byte {
	var ts []byte
	ts = protowire.AppendTag(ts, tsLabels, protowire.BytesType)
	ts = protowire.AppendBytes(ts, label("__name__", name))
	for i := range samples {
		var s []byte
		s = protowire.AppendTag(s, 1, protowire.Fixed64Type)
		s = protowire.AppendFixed64(s, uint64(i))
		s = protowire.AppendTag(s, 2, protowire.VarintType)
		s = protowire.AppendVarint(s, uint64(1_700_000_000_000+i))
		ts = protowire.AppendTag(ts, tsSamples, protowire.BytesType)
		ts = protowire.AppendBytes(ts, s)
	}
	return ts
}

// writeRequest is a WriteRequest holding the given time series.
func writeRequest(ts ...[]byte) []byte {
	var b []byte
	for _, s := range ts {
		b = protowire.AppendTag(b, rwTimeseries, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	}
	return b
}

func post(t *testing.T, url, contentType, encoding string, body []byte, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// snappyBomb is a snappy block that declares one byte more than the
// bound and holds nothing: the receiver must refuse it from its header.
func snappyBomb() []byte {
	return append(protowire.AppendVarint(nil, maxBody+1), 0)
}

// TestRemoteWriteStatus: every answer of POST /api/v1/write. 204 only
// with the request spooled, holding the WriteRequest as received
// (uncompressed); 400 only for a body that is not one; 503 with
// Retry-After for every spool failure (Prometheus 2.42 drops what is
// answered 429).
func TestRemoteWriteStatus(t *testing.T) {
	wr := writeRequest(series("up", 2), series("go_goroutines", 1))
	badUTF8 := writeRequest(func() []byte {
		var ts []byte
		ts = protowire.AppendTag(ts, tsLabels, protowire.BytesType)
		return protowire.AppendBytes(ts, label("__name__", "\xff\xfe"))
	}())
	for _, tc := range []struct {
		name      string
		spoolErr  error
		enc, ct   string
		body      []byte
		want      int
		spooled   bool
		retryable bool
	}{
		{name: "valid", enc: "snappy", body: snappy.Encode(nil, wr), want: 204, spooled: true},
		{name: "no Content-Encoding", body: snappy.Encode(nil, wr), want: 204, spooled: true},
		{name: "empty WriteRequest", enc: "snappy", body: snappy.Encode(nil, nil), want: 204},
		{name: "not snappy", enc: "snappy", body: []byte("\xff\xff\xff\xff\xff\xff not snappy"), want: 400},
		{name: "snappy of garbage", enc: "snappy", body: snappy.Encode(nil, []byte("\x0a\xff\xff garbage")), want: 400},
		{name: "timeseries not a message", enc: "snappy", body: snappy.Encode(nil, []byte{0x08, 0x01}), want: 400},
		{name: "label not UTF-8", enc: "snappy", body: snappy.Encode(nil, badUTF8), want: 400},
		{name: "gzip", enc: "gzip", body: gzipped(wr), want: 415},
		{name: "remote-write 2.0", ct: "application/x-protobuf;proto=io.prometheus.write.v2.Request", body: snappy.Encode(nil, wr), want: 415},
		{name: "remote-write 1.0 named", ct: "application/x-protobuf;proto=prometheus.WriteRequest", body: snappy.Encode(nil, wr), want: 204, spooled: true},
		{name: "not protobuf", ct: "text/plain", body: snappy.Encode(nil, wr), want: 415},
		{name: "snappy bomb", enc: "snappy", body: snappyBomb(), want: 413},
		{name: "spool full", spoolErr: spool.ErrFull, body: snappy.Encode(nil, wr), want: 503, retryable: true},
		{name: "disk full", spoolErr: spool.ErrNoSpace, body: snappy.Encode(nil, wr), want: 503, retryable: true},
		{name: "agent stopping", spoolErr: ingest.ErrClosed, body: snappy.Encode(nil, wr), want: 503, retryable: true},
		{name: "over half the quota", spoolErr: fmt.Errorf("%w: over half the quota", ingest.ErrRecordTooLarge), body: snappy.Encode(nil, wr), want: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, srv := serve(t, nil)
			fs.Fail(tc.spoolErr)
			ct := cmp.Or(tc.ct, "application/x-protobuf")
			resp, body := post(t, srv.URL+"/api/v1/write", ct, tc.enc, tc.body)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.want)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != tc.retryable {
				t.Errorf("Retry-After %q; want one: %t", resp.Header.Get("Retry-After"), tc.retryable)
			}
			recs := fs.Taken()
			if !tc.spooled {
				if len(recs) != 0 {
					t.Fatalf("%d records spooled, want none", len(recs))
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d records spooled, want 1", len(recs))
			}
			if k, b, err := telemetry.Decode(recs[0]); err != nil || k != telemetry.RemoteWrite || !bytes.Equal(b, wr) {
				t.Fatalf("spooled %v %x %v, want the WriteRequest as remote-write", k, b, err)
			}
		})
	}
}

// TestRemoteWriteAuthAndMethod: the ingest tokens apply (401 without
// one), and only POST is served.
func TestRemoteWriteAuthAndMethod(t *testing.T) {
	tokensFile := t.TempDir() + "/tokens"
	os.WriteFile(tokensFile, []byte("secret-token-0123456789 prometheus\n"), 0o600)
	tokens, err := auth.LoadTokens(tokensFile)
	if err != nil {
		t.Fatal(err)
	}
	fs, srv := serve(t, func(c *Config) { c.Tokens = tokens })
	body := snappy.Encode(nil, writeRequest(series("up", 1)))
	for _, path := range []string{"/api/v1/write", "/v1/metrics"} {
		resp, answer := post(t, srv.URL+path, "application/x-protobuf", "", body)
		if resp.StatusCode != 401 {
			t.Errorf("%s without a token: %d, want 401", path, resp.StatusCode)
		}
		if path == "/v1/metrics" {
			checkOTLPAnswer(t, resp, answer) // a google.rpc.Status, as OTLP asks of every 4xx
		}
		if resp, _ := post(t, srv.URL+path, "application/x-protobuf", "", body, "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
			t.Errorf("%s with an unknown token: %d, want 401", path, resp.StatusCode)
		}
	}
	if resp, _ := post(t, srv.URL+"/api/v1/write", "", "snappy", body, "Authorization", "Bearer secret-token-0123456789"); resp.StatusCode != 204 {
		t.Errorf("with the token: %d, want 204", resp.StatusCode)
	}
	resp, err := http.Get(srv.URL + "/api/v1/write")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("GET without a token: %d, want 401 (the token is checked first)", resp.StatusCode)
	}
	if n := len(fs.Taken()); n != 1 {
		t.Errorf("%d records spooled, want the one authorized request", n)
	}
}

// TestRemoteWriteSplitsOverMaxRecord: a WriteRequest over --max-record
// is spooled as several records, each a valid WriteRequest, that
// together hold its series in order; one series over the limit is 413
// with nothing spooled.
func TestRemoteWriteSplitsOverMaxRecord(t *testing.T) {
	var all [][]byte
	for i := range 200 {
		all = append(all, series(fmt.Sprintf("metric_%03d", i), 20))
	}
	wr := writeRequest(all...)
	const maxRecord = 8 << 10
	fs, srv := serve(t, func(c *Config) { c.MaxRecordBytes = maxRecord })
	if resp, body := post(t, srv.URL+"/api/v1/write", "", "snappy", snappy.Encode(nil, wr)); resp.StatusCode != 204 {
		t.Fatalf("status %d (%s), want 204", resp.StatusCode, body)
	}
	recs := fs.Taken()
	if len(recs) < 2 {
		t.Fatalf("%d records for a %d-byte request with --max-record %d", len(recs), len(wr), maxRecord)
	}
	var joined []byte
	for _, r := range recs {
		if len(r) > maxRecord {
			t.Fatalf("a record of %d bytes, limit %d", len(r), maxRecord)
		}
		_, b, err := telemetry.Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := checkWriteRequest(b); err != nil || n == 0 {
			t.Fatalf("a piece is not a WriteRequest with series: %d %v", n, err)
		}
		joined = append(joined, b...)
	}
	if !bytes.Equal(joined, wr) {
		t.Fatal("the pieces together are not the request")
	}
	huge := writeRequest(series("huge", 2000))
	fs2, srv2 := serve(t, func(c *Config) { c.MaxRecordBytes = maxRecord })
	if resp, body := post(t, srv2.URL+"/api/v1/write", "", "snappy", snappy.Encode(nil, huge)); resp.StatusCode != 413 {
		t.Fatalf("one series over --max-record: %d (%s), want 413", resp.StatusCode, body)
	}
	if n := len(fs2.Taken()); n != 0 {
		t.Fatalf("%d records spooled of a refused request", n)
	}
}

// TestStalledBodies: a body that goes silent on any of the new
// endpoints ends with 503 (a status its senders retry) once the idle timeout passes, with nothing
// spooled (a frozen client would otherwise hold the handler and its
// buffer for as long as the connection lasts).
func TestStalledBodies(t *testing.T) {
	fs, srv := serve(t, func(c *Config) { c.BodyIdleTimeout = 50 * time.Millisecond })
	for _, path := range []string{"/api/v1/write", "/v1/metrics", "/v1/logs", "/v1/traces"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n\x0a\x05", path, 64<<20)
		conn.SetReadDeadline(time.Now().Add(time.Minute)) // without the idle timeout: fail, not hang
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: the stalled request got no answer: %v", path, err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: stalled body: %d (Retry-After %q), want 503 with Retry-After", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of stalled requests", n)
	}
}

func logsRequest(service string, bodies ...string) *collogspb.ExportLogsServiceRequest {
	var recs []*logspb.LogRecord
	for _, b := range bodies {
		recs = append(recs, &logspb.LogRecord{TimeUnixNano: 1_700_000_000_000_000_000, SeverityText: "INFO",
			Body:    &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: b}},
			TraceId: bytes.Repeat([]byte{0xab}, 16), SpanId: bytes.Repeat([]byte{0xcd}, 8)})
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: service}}}}},
		ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}},
	}}}
}

// TestOTLPHTTPStatus: every answer of the OTLP/HTTP endpoints, as the
// OTLP spec has them: 200 with an Export…ServiceResponse in the
// request's encoding once spooled; a google.rpc.Status otherwise; 429 or
// 503 with Retry-After (which the exporters retry) while the spool
// cannot take it; 400 only for a malformed body.
func TestOTLPHTTPStatus(t *testing.T) {
	req, _ := proto.Marshal(logsRequest("checkout", "hello"))
	const jsonReq = `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"checkout"}}]},
		"scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000000","severityText":"INFO","body":{"stringValue":"hello"},
		"traceId":"abababababababababababababababab","spanId":"cdcdcdcdcdcdcdcd"}]}]}]}`
	bomb := make([]byte, maxBody+1)
	for _, tc := range []struct {
		name, ct, enc string
		spoolErr      error
		body          []byte
		want          int
		spooled       bool
		retryable     bool
	}{
		{name: "protobuf", ct: "application/x-protobuf", body: req, want: 200, spooled: true},
		{name: "protobuf gzip", ct: "application/x-protobuf", enc: "gzip", body: gzipped(req), want: 200, spooled: true},
		{name: "json", ct: "application/json", body: []byte(jsonReq), want: 200, spooled: true},
		{name: "json with charset", ct: "application/json; charset=utf-8", body: []byte(jsonReq), want: 200, spooled: true},
		{name: "empty request", ct: "application/x-protobuf", want: 200},
		{name: "malformed protobuf", ct: "application/x-protobuf", body: []byte("\x0a\xff\xff\xff"), want: 400},
		{name: "malformed json", ct: "application/json", body: []byte(`{"resourceLogs":[`), want: 400},
		{name: "json trace id not hex", ct: "application/json", body: []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"zz"}]}]}]}`), want: 400},
		{name: "corrupt gzip", ct: "application/x-protobuf", enc: "gzip", body: []byte("not gzip"), want: 400},
		{name: "gzip bomb", ct: "application/x-protobuf", enc: "gzip", body: gzipped(bomb), want: 413},
		{name: "unknown content type", ct: "text/plain", body: req, want: 415},
		{name: "no content type", body: req, want: 415},
		{name: "brotli", ct: "application/x-protobuf", enc: "br", body: req, want: 415},
		{name: "spool full", ct: "application/x-protobuf", spoolErr: spool.ErrFull, body: req, want: 429, retryable: true},
		{name: "disk full", ct: "application/x-protobuf", spoolErr: spool.ErrNoSpace, body: req, want: 503, retryable: true},
		{name: "agent stopping", ct: "application/json", spoolErr: ingest.ErrClosed, body: []byte(jsonReq), want: 503, retryable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, srv := serve(t, nil)
			fs.Fail(tc.spoolErr)
			resp, body := post(t, srv.URL+"/v1/logs", tc.ct, tc.enc, tc.body)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d (%q), want %d", resp.StatusCode, body, tc.want)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != tc.retryable {
				t.Errorf("Retry-After %q; want one: %t", resp.Header.Get("Retry-After"), tc.retryable)
			}
			checkOTLPAnswer(t, resp, body)
			recs := fs.Taken()
			if !tc.spooled {
				if len(recs) != 0 {
					t.Fatalf("%d records spooled, want none", len(recs))
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d records spooled, want 1", len(recs))
			}
			k, b, err := telemetry.Decode(recs[0])
			if err != nil || k != telemetry.OTLPLogs {
				t.Fatalf("spooled %v %v, want otlp-logs", k, err)
			}
			var got collogspb.ExportLogsServiceRequest
			if err := proto.Unmarshal(b, &got); err != nil || !proto.Equal(&got, logsRequest("checkout", "hello")) {
				t.Fatalf("spooled %v (%v), want the request (JSON ids read as hex)", &got, err)
			}
		})
	}
}

// checkOTLPAnswer: a success is an Export…ServiceResponse and a failure
// a google.rpc.Status, each in the encoding the Content-Type says.
func checkOTLPAnswer(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	ct := resp.Header.Get("Content-Type")
	isJSON := ct == "application/json"
	if !isJSON && ct != "application/x-protobuf" {
		t.Fatalf("answer of Content-Type %q", ct)
	}
	if resp.StatusCode == 200 {
		if isJSON && string(body) != "{}" || !isJSON && len(body) != 0 {
			t.Fatalf("success body %q, want an empty Export…ServiceResponse", body)
		}
		return
	}
	var st status.Status
	if isJSON {
		if !bytes.Contains(body, []byte(`"message"`)) {
			t.Fatalf("failure body %q is not a JSON Status", body)
		}
		return
	}
	if err := proto.Unmarshal(body, &st); err != nil || st.Message == "" {
		t.Fatalf("failure body %q is not a Status: %v", body, err)
	}
}

// TestOTLPAllSignals: metrics, logs and traces each land as their own
// kind; a request over --max-record is split by resource, and one
// resource over it is 413.
func TestOTLPAllSignals(t *testing.T) {
	const maxRecord = 4 << 10
	fs, srv := serve(t, func(c *Config) { c.MaxRecordBytes = maxRecord })
	var spans []*tracepb.ResourceSpans
	for i := range 40 {
		spans = append(spans, &tracepb.ResourceSpans{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: bytes.Repeat([]byte{byte(i)}, 16), SpanId: bytes.Repeat([]byte{1}, 8), Name: strings.Repeat("span ", 40)}}}}})
	}
	traces, _ := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: spans})
	metrics, _ := proto.Marshal(&colmetricspb.ExportMetricsServiceRequest{})
	for path, body := range map[string][]byte{"/v1/traces": traces, "/v1/metrics": metrics} {
		if resp, b := post(t, srv.URL+path, "application/x-protobuf", "", body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d (%s)", path, resp.StatusCode, b)
		}
	}
	var got coltracepb.ExportTraceServiceRequest
	for _, r := range fs.Taken() {
		k, b, err := telemetry.Decode(r)
		if err != nil || k != telemetry.OTLPTraces || len(r) > maxRecord {
			t.Fatalf("record %v %v of %d bytes", k, err, len(r))
		}
		var piece coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &piece); err != nil {
			t.Fatal(err)
		}
		got.ResourceSpans = append(got.ResourceSpans, piece.ResourceSpans...)
	}
	if n := len(fs.Taken()); n < 2 || !proto.Equal(&got, &coltracepb.ExportTraceServiceRequest{ResourceSpans: spans}) {
		t.Fatalf("%d records; together equal to the request: %t", n, proto.Equal(&got, &coltracepb.ExportTraceServiceRequest{ResourceSpans: spans}))
	}
	big, _ := proto.Marshal(logsRequest("big", strings.Repeat("x", maxRecord)))
	if resp, b := post(t, srv.URL+"/v1/logs", "application/x-protobuf", "", big); resp.StatusCode != 413 {
		t.Fatalf("one resource over --max-record: %d (%s), want 413", resp.StatusCode, b)
	}
}
