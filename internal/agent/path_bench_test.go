package agent

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/transport/grpctransport"
	"github.com/sluicehq/sluice/internal/transport/memconn"
	"github.com/sluicehq/sluice/seglog"
)

// ackSink acknowledges every message at once and looks at nothing: the
// sink's side costs as little as possible, so what the benchmark measures
// is the agent's path.
type ackSink struct{}

func (ackSink) ServeRead(protocol.Conn) error {
	return protocol.Errorf(protocol.StatusInvalid, "no reads")
}

func (ackSink) ServeSend(c protocol.Conn) error {
	if _, err := c.Recv(); err != nil {
		return nil
	}
	if err := c.Send(bigWelcome()); err != nil {
		return nil
	}
	var ack protocol.Ack
	ack.Ranges = make([]protocol.IDRange, 1)
	for {
		f, err := c.Recv()
		if err != nil {
			return nil
		}
		if m, ok := f.(*protocol.Message); ok {
			ack.Ranges[0] = protocol.IDRange{First: m.ID, Last: m.ID}
			if err := c.Send(&ack); err != nil {
				return nil
			}
		}
	}
}

// BenchmarkAgentPath measures the agent's side of the data path, per
// message: an HTTP ingest request of 1000 records of about 200 bytes (one
// message) is read, packed, compressed, appended to the spool (no fsync:
// the disk is not what is measured), read back and sent to a sink that
// acknowledges at once, over memconn or over gRPC on loopback. One op is
// one request, so allocs/op and B/op are per message.
//
//	go test ./internal/agent/ -run '^$' -bench AgentPath -benchmem -benchtime 2s
func BenchmarkAgentPath(b *testing.B) {
	var body bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&body, `{"ts":%d,"host":"web-%02d","level":"info","path":"/api/v1/items/%d","status":200,"bytes":%d,"ms":%d,"ua":"bench/1.0"}`+"\n",
			1700000000000+i, i%16, i*7919%100000, i*31%65536, i%97)
	}
	for _, transport := range []string{"memconn", "grpc"} {
		for _, k := range []codec.Kind{codec.Plain, codec.Zstd} {
			b.Run(fmt.Sprintf("%s/%v", transport, k), func(b *testing.B) {
				benchAgentPath(b, transport, k, body.Bytes())
			})
		}
	}
}

func benchAgentPath(b *testing.B, transport string, k codec.Kind, body []byte) {
	cfg := func(c *Config) {
		c.Compression, c.SpoolSync, c.Linger = k, seglog.SyncNone(), 50*time.Microsecond
		c.ReconnectMin, c.ReconnectMax = time.Millisecond, 10*time.Millisecond
	}
	var mod func(*Config)
	switch transport {
	case "memconn":
		mod = func(c *Config) { cfg(c); c.SinkAddr, c.Dialer = "", &memconn.Dialer{Service: ackSink{}} }
	case "grpc":
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := grpc.NewServer()
		grpctransport.Register(srv, ackSink{})
		go srv.Serve(lis)
		defer srv.Stop()
		mod = func(c *Config) { cfg(c); c.SinkAddr = lis.Addr().String() }
	}
	a := newTestAgent(b, filepath.Join(b.TempDir(), "spool"), mod)
	defer a.Close()
	h := a.Handler()
	post := func() {
		req := httptest.NewRequest(http.MethodPost, "/v1/records", bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("ingest: %d %s", w.Code, w.Body)
		}
	}
	post() // connect and warm the pools
	waitAcked(b, a)
	before := a.Stats().SpooledMessages
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		post()
	}
	waitAcked(b, a)
	b.StopTimer()
	if msgs := a.Stats().SpooledMessages - before; msgs != uint64(b.N) {
		b.Logf("%d requests made %d messages", b.N, msgs)
	}
}
