package client_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/client"
)

// counter is the value of the counter family name in reg (0 if absent).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestProducerOptions: AgentID names the producer (ID), Metrics registers
// the agent's series, Compression(Plain) sends message bodies as they are
// while the default zstd shrinks repetitive ones, and records produced
// with Linger and SpoolQuota set all reach the sink.
func TestProducerOptions(t *testing.T) {
	s := newSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	recs, want := records(strings.Repeat("repetitive ", 20), 500)
	var got []string
	for _, tc := range []struct {
		name  string
		opts  []client.ProducerOpt
		plain bool
	}{
		{"plain", []client.ProducerOpt{client.Compression(client.Plain), client.Linger(time.Millisecond), client.SpoolQuota(64 << 20)}, true},
		{"zstd", nil, false},
	} {
		reg := prometheus.NewRegistry()
		id := "options-" + tc.name
		p := newProducer(t, append([]client.ProducerOpt{client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()),
			client.AgentID(id), client.Metrics(reg)}, tc.opts...)...)
		if p.ID() != id {
			t.Fatalf("%s: ID %q, want %q", tc.name, p.ID(), id)
		}
		if err := p.Produce(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		raw := counter(t, reg, "sluice_agent_message_bytes_uncompressed_total")
		wire := counter(t, reg, "sluice_agent_message_bytes_compressed_total")
		if raw == 0 {
			t.Fatalf("%s: Metrics registered no message bytes", tc.name)
		}
		if tc.plain && wire < raw {
			t.Errorf("%s: %v bytes on the wire for %v uncompressed: compressed anyway", tc.name, wire, raw)
		}
		if !tc.plain && wire > raw/2 {
			t.Errorf("%s: %v bytes on the wire for %v uncompressed of repetitive records", tc.name, wire, raw)
		}
		got = append(got, want...)
	}
	sameMultiset(t, "store", readAll(t, newConsumer(t, client.SinkAddrs(s.addr))), got)
}

// TestSpoolQuotaOption: with no sink to drain it, a 2 MiB spool refuses
// records with ErrSpoolFull long before the default quota (1 GiB) would.
func TestSpoolQuotaOption(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p := newProducer(t, client.SinkAddrs(dead), client.SpoolDir(t.TempDir()), client.SpoolQuota(2<<20))
	const record, limit = 16 << 10, 16 << 20
	produced := 0
	for produced < limit {
		r := make([]byte, record) // incompressible: the spool holds what it is given
		rand.Read(r)
		err = p.Produce(ctx, r)
		if err != nil {
			break
		}
		produced += record
	}
	if !errors.Is(err, client.ErrSpoolFull) {
		t.Fatalf("after %d bytes: %v, want ErrSpoolFull", produced, err)
	}
	if produced > 4<<20 {
		t.Fatalf("a 2 MiB spool took %d bytes", produced)
	}
}

// countingTransport counts the requests it carries.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestProducerHandler: a Producer serves the agent's ingest API
// (Handler), an HTTPProducer sends to it through the http.Client it is
// given (HTTPClient), under a producer id of its own unless told one (ID),
// and the records reach the sink.
func TestProducerHandler(t *testing.T) {
	s := newSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p := newProducer(t, client.SinkAddrs(s.addr), client.SpoolDir(t.TempDir()))
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()

	rt := &countingTransport{}
	hp, err := client.NewHTTPProducer(srv.URL, client.HTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	defer hp.Close()
	if !strings.HasPrefix(hp.ID(), "client-") {
		t.Errorf("generated producer id %q", hp.ID())
	}
	named, err := client.NewHTTPProducer(srv.URL, client.ProducerID("named"))
	if err != nil {
		t.Fatal(err)
	}
	defer named.Close()
	if named.ID() != "named" {
		t.Errorf("ID %q, want the ProducerID", named.ID())
	}

	recs, want := records("via-handler", 100)
	if err := hp.Produce(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if rt.n.Load() == 0 {
		t.Fatal("the records did not travel through the HTTPClient's transport")
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sameMultiset(t, "store", readAll(t, newConsumer(t, client.SinkAddrs(s.addr))), want)
}

// TestIsRetryable: a broken connection may heal, a cancel or nothing at
// all is not worth retrying (the sink's refusals: TestTLSAndTokens).
func TestIsRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{io.ErrUnexpectedEOF, true},
		{context.DeadlineExceeded, true},
	} {
		if got := client.IsRetryable(tc.err); got != tc.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
