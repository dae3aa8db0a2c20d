package importtest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

var quiet = slog.New(slog.DiscardHandler)

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// A Producer spools durably even while no sink is reachable.
func TestProducerSpoolsWithoutSink(t *testing.T) {
	p, err := client.NewProducer(client.SinkAddrs(deadAddr(t)), client.SpoolDir(t.TempDir()),
		client.Compression(client.Plain), client.SpoolQuota(8<<20), client.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Produce(ctx, []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.ProducedRecords != 2 || st.SpooledMessages == 0 || st.AckedMessages != 0 {
		t.Fatalf("stats: %+v", st)
	}
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	if err := p.Flush(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush without a sink: %v", err)
	}
}

// An HTTPProducer speaks the ingest API.
func TestHTTPProducerHeaders(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path, r.Header.Get("Sluice-Producer"), r.Header.Get("Sluice-Sequence"), string(b))
		io.WriteString(w, `{"records":2,"duplicate":false}`)
	}))
	defer srv.Close()
	p, err := client.NewHTTPProducer(srv.URL, client.ProducerID("me"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Produce(context.Background(), []byte("x"), []byte("y")); err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, "|"); s != "/v1/records|me|1|x\ny\n" {
		t.Fatalf("request: %q", s)
	}
}

// A Consumer of nothing says so instead of hanging.
func TestConsumerReportsUnreachableSink(t *testing.T) {
	c, err := client.NewConsumer(client.SinkAddrs(deadAddr(t)), client.Group("g"), client.Logger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, err := range c.Records(ctx) {
		if err == nil || ctx.Err() != nil {
			t.Fatalf("got %v", err)
		}
		return
	}
	t.Fatal("no error")
}

// A library is quiet unless given a logger: a Producer without Logger
// writes nothing through slog.Default (before issue 24 it logged "agent
// started" and every reconnection there, on the application's stderr).
func TestProducerQuietByDefault(t *testing.T) {
	var buf strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)
	p, err := client.NewProducer(client.SinkAddrs(deadAddr(t)), client.SpoolDir(t.TempDir()), client.Compression(client.Plain))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Produce(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if buf.Len() != 0 {
		t.Fatalf("a Producer without Logger logged through slog.Default:\n%s", buf.String())
	}
}
