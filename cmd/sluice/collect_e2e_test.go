package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
)

// TestCollectorsSurviveKills: remote-write, OTLP/HTTP and OTLP/gRPC
// requests sent one after another to `sluice agent` while the agent and
// then the sink are SIGKILLed and restarted: every request that was
// answered with success is in the sink's store afterwards (the answer
// came only after fsync), and the collectors' retries aside nothing is
// stored that was not sent.
func TestCollectorsSurviveKills(t *testing.T) {
	dir := t.TempDir()
	sinkAddr, ingestAddr, grpcAddr, agentMetrics := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	sink := start(t, "sink", "sink", "--listen", sinkAddr, "--data", filepath.Join(dir, "sink"))
	ag := start(t, "agent", "agent", "--sink", sinkAddr, "--spool", filepath.Join(dir, "spool"),
		"--ingest", ingestAddr, "--otlp-grpc", grpcAddr, "--metrics", agentMetrics)
	listening(t, ingestAddr)
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	w := &collectorWriter{http: &http.Client{Timeout: 10 * time.Second}, ingest: ingestAddr,
		grpc: collogspb.NewLogsServiceClient(cc), acked: map[string]bool{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); w.run(stop) }()
	more := func(what string) {
		n := w.count() + 30
		testwait.For(t, what, func() bool { return w.count() >= n })
	}
	more("requests answered before the agent's SIGKILL")
	ag.restart()
	more("requests answered after the agent's restart")
	sink.restart()
	more("requests answered after the sink's restart")
	close(stop)
	<-done

	want := w.answered()
	var stored map[string]int
	last := -2.0
	testwait.For(t, "every answered request in the sink's store", func() bool {
		// Read the store again only when the agent has had more acked.
		acked := metric(agentMetrics, "sluice_agent_acked_records_total")
		if acked == last {
			return false
		}
		last = acked
		stored = storedCollectorItems(t, sinkAddr)
		for k := range want {
			if stored[k] == 0 {
				return false
			}
		}
		return true
	})
	dups := 0
	for k, n := range stored {
		if _, ok := w.sent[k]; !ok {
			t.Errorf("stored %q, which was never sent", k)
		}
		dups += n - 1
	}
	t.Logf("%d requests answered with success, %d items stored (%d stored twice or more: at-least-once)", len(want), len(stored), dups)
}

// collectorWriter sends numbered requests in turn over remote-write,
// OTLP/HTTP and OTLP/gRPC, and keeps which were answered with success.
type collectorWriter struct {
	http   *http.Client
	ingest string
	grpc   collogspb.LogsServiceClient

	mu    sync.Mutex
	acked map[string]bool
	sent  map[string]bool
}

func (w *collectorWriter) run(stop chan struct{}) {
	w.sent = map[string]bool{}
	for i := 0; i < 100_000; i++ {
		select {
		case <-stop:
			return
		default:
		}
		var key string
		var err error
		switch i % 3 {
		case 0:
			key = fmt.Sprintf("rw-%d", i)
			err = w.remoteWrite(key)
		case 1:
			key = fmt.Sprintf("http-%d", i)
			err = w.otlpHTTP(key)
		default:
			key = fmt.Sprintf("grpc-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = w.grpc.Export(ctx, logsWith(key))
			cancel()
		}
		w.mu.Lock()
		w.sent[key] = true
		if err == nil {
			w.acked[key] = true
		}
		w.mu.Unlock()
	}
}

func (w *collectorWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

func (w *collectorWriter) answered() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

func (w *collectorWriter) post(path, contentType, encoding string, body []byte, want int) error {
	req, _ := http.NewRequest(http.MethodPost, "http://"+w.ingest+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return errors.New(resp.Status)
	}
	return nil
}

// remoteWrite sends a WriteRequest of one series labelled key.
func (w *collectorWriter) remoteWrite(key string) error {
	var l, ts, wr []byte
	l = protowire.AppendTag(l, 1, protowire.BytesType)
	l = protowire.AppendString(l, "key")
	l = protowire.AppendTag(l, 2, protowire.BytesType)
	l = protowire.AppendString(l, key)
	ts = protowire.AppendTag(ts, 1, protowire.BytesType)
	ts = protowire.AppendBytes(ts, l)
	wr = protowire.AppendTag(wr, 1, protowire.BytesType)
	wr = protowire.AppendBytes(wr, ts)
	return w.post("/api/v1/write", "application/x-protobuf", "snappy", snappy.Encode(nil, wr), http.StatusNoContent)
}

func (w *collectorWriter) otlpHTTP(key string) error {
	body, _ := proto.Marshal(logsWith(key))
	return w.post("/v1/logs", "application/x-protobuf", "", body, http.StatusOK)
}

func logsWith(key string) *collogspb.ExportLogsServiceRequest {
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{
		LogRecords: []*logspb.LogRecord{{Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: key}}}}}}}}}
}

// storedCollectorItems reads the sink's store and counts the keys of
// the writer's requests in it.
func storedCollectorItems(t *testing.T, sinkAddr string) map[string]int {
	t.Helper()
	got := map[string]int{}
	d, cc, err := grpctransport.Connect(sinkAddr, grpctransport.ClientOptions{MaxRecvBytes: 64 << 20})
	if err != nil {
		return got
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := d.Read(ctx)
	if err != nil {
		return got
	}
	defer c.Close(nil)
	if c.Send(&protocol.ReadStart{}) != nil || c.Send(&protocol.ReadMore{N: 1 << 30}) != nil {
		return got
	}
	for {
		f, err := c.Recv()
		if err != nil {
			return got
		}
		switch f := f.(type) {
		case *protocol.Stored:
			for _, r := range f.Records {
				got[collectorKey(t, r)]++
			}
		case *protocol.EndOfLog:
			return got
		}
	}
}

// collectorKey is the key a stored record of the writer carries.
func collectorKey(t *testing.T, rec []byte) string {
	k, body, err := telemetry.Decode(rec)
	if err != nil {
		t.Fatalf("a stored record that is not the writer's: %v", err)
	}
	if k == telemetry.OTLPLogs {
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil || len(req.ResourceLogs) != 1 {
			t.Fatalf("stored logs request: %v", err)
		}
		return req.ResourceLogs[0].ScopeLogs[0].LogRecords[0].Body.GetStringValue()
	}
	// A WriteRequest of one series with one label: WriteRequest.timeseries
	// (1) → TimeSeries.labels (1) → Label.value (2).
	ts := firstBytes(t, body, 1)
	return string(firstBytes(t, firstBytes(t, ts, 1), 2))
}

// firstBytes is the first bytes field numbered num in the message b.
func firstBytes(t *testing.T, b []byte, num protowire.Number) []byte {
	t.Helper()
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			break
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return v
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			break
		}
		b = b[l:]
	}
	t.Fatalf("no field %d in a stored WriteRequest", num)
	return nil
}

// TestCollectorsTLSAndTokens: `sluice agent` with the ingest TLS and
// tokens serves remote-write over HTTPS and OTLP/gRPC over TLS, both
// requiring a token as /v1/records does.
func TestCollectorsTLSAndTokens(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := testpki.SelfSigned(t, dir)
	tokens := filepath.Join(dir, "tokens")
	const token = "collector-token-0123456789"
	os.WriteFile(tokens, []byte(token+" prometheus\n"), 0o600)
	ingest, grpcAddr := freeAddr(t), freeAddr(t)
	start(t, "agent", "agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "spool"), "--ingest", ingest,
		"--otlp-grpc", grpcAddr, "--ingest-tls-cert", certFile, "--ingest-tls-key", keyFile, "--ingest-tokens", tokens)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	wr := snappy.Encode(nil, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), nil))
	post := func(authz string) int {
		return postStatus(client, "https://"+ingest+"/api/v1/write", wr, "Content-Encoding", "snappy", "Authorization", authz)
	}
	testwait.For(t, "the agent to serve HTTPS", func() bool { return post("") != -1 })
	if got := post(""); got != http.StatusUnauthorized {
		t.Errorf("remote-write without a token: %d, want 401", got)
	}
	if got := post("Bearer " + token); got != http.StatusNoContent {
		t.Errorf("remote-write with the token: %d, want 204", got)
	}
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	logs := collogspb.NewLogsServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Bound)
	defer cancel()
	if _, err := logs.Export(ctx, logsWith("no token")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("OTLP/gRPC without a token: %v, want Unauthenticated", err)
	}
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if _, err := logs.Export(authed, logsWith("with token")); err != nil {
		t.Errorf("OTLP/gRPC over TLS with the token: %v", err)
	}
}
