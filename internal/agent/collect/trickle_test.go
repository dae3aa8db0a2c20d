package collect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/telemetry"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// stallClock drives the stall rule of a test's receiver: the time is
// what the test sets, and fed what the handler has read so far.
type stallClock struct {
	base time.Time
	now  atomic.Int64 // nanoseconds past base
	fed  atomic.Int64
}

func (k *stallClock) clock(fed int64) time.Time {
	k.fed.Store(fed)
	return k.base.Add(time.Duration(k.now.Load()))
}

func (k *stallClock) advance(d time.Duration) { k.now.Add(int64(d)) }

// waitFed waits until the handler has read n bytes of the body.
func (k *stallClock) waitFed(t *testing.T, n int64) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("the handler to read %d bytes", n), func() bool { return k.fed.Load() == n })
}

// rawRequest starts a POST to path declaring length body bytes, and
// returns the connection and the answer once it comes.
func rawRequest(t *testing.T, addr, path string, length int) (net.Conn, chan *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", path, length)
	answer := make(chan *http.Response, 1)
	go func() {
		resp, _ := http.ReadResponse(bufio.NewReader(conn), nil)
		answer <- resp
	}()
	return conn, answer
}

func send(t *testing.T, conn net.Conn, p []byte) {
	t.Helper()
	if _, err := conn.Write(p); err != nil {
		t.Fatal(err)
	}
}

// TestTrickledBodies: on every endpoint, a body that declares 64 MiB
// (the receiver reserves 4 MiB for it), sends 100 KiB and then a byte
// every 20 s (never silent for the idle timeout) is answered 503 once a
// stall timeout (a minute, the default) has passed with less than 64 KiB
// more, and not before; nothing is spooled. Before, it held its handler
// and buffer for as long as it trickled.
func TestTrickledBodies(t *testing.T) {
	k := &stallClock{base: time.Unix(1e9, 0)}
	fs, srv := serve(t, func(c *Config) { c.stallClock = k.clock })
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, ep := range endpoints {
		k.fed.Store(0)
		conn, answer := rawRequest(t, addr, ep.path, maxBody)
		send(t, conn, make([]byte, 100<<10))
		fed := int64(100 << 10)
		k.waitFed(t, fed)
		for step := 1; step <= 3; step++ {
			k.advance(defaults.StallTimeout / 3)
			send(t, conn, []byte{0})
			fed++
			if step < 3 {
				k.waitFed(t, fed)
				select {
				case resp := <-answer:
					t.Fatalf("%s: answered %v after %d thirds of the stall timeout, want nothing before it", ep.path, resp.StatusCode, step)
				default:
				}
			}
		}
		select {
		case resp := <-answer:
			if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("%s: a trickled body: %v, want 503", ep.path, resp)
			}
			// The stall rule's 503, not the idle timeout's (which a
			// client that stops trickling gets after 30 s anyway).
			if b, _ := io.ReadAll(resp.Body); !bytes.Contains(b, []byte("stall timeout")) {
				t.Fatalf("%s: 503 %q, want the stall rule's", ep.path, b)
			}
		case <-time.After(testwait.Bound):
			t.Fatalf("%s: a trickled body got no answer", ep.path)
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of trickled bodies", n)
	}
}

// TestSlowBodyProgresses: a body sent at 32 KiB per half stall timeout
// (64 KiB a minute at the default, the least the rule asks) is received
// whole and spooled; so is a small body (under 64 KiB held) sent a byte
// per 20 s, which holds too little to be cut.
func TestSlowBodyProgresses(t *testing.T) {
	k := &stallClock{base: time.Unix(1e9, 0)}
	fs, srv := serve(t, func(c *Config) { c.stallClock = k.clock })
	addr := strings.TrimPrefix(srv.URL, "http://")
	// 8 resources of 48 KiB: concatenated requests merge.
	var big []byte
	for i := range 8 {
		b, _ := proto.Marshal(logsRequest(fmt.Sprintf("slow-%d", i), strings.Repeat("y", 48<<10)))
		big = append(big, b...)
	}
	small, _ := proto.Marshal(logsRequest("small", "a byte at a time"))
	for _, tc := range []struct {
		name  string
		body  []byte
		chunk int
		every time.Duration
	}{
		{"64 KiB a minute", big, 32 << 10, defaults.StallTimeout / 2},
		{"a small body a byte per 20 s", small, 1, defaults.StallTimeout / 3},
	} {
		k.fed.Store(0)
		conn, answer := rawRequest(t, addr, "/v1/logs", len(tc.body))
		for off := 0; off < len(tc.body); off += tc.chunk {
			end := min(off+tc.chunk, len(tc.body))
			send(t, conn, tc.body[off:end])
			if end < len(tc.body) {
				k.waitFed(t, int64(end))
				k.advance(tc.every)
			}
		}
		select {
		case resp := <-answer:
			if resp == nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %v, want 200", tc.name, resp)
			}
		case <-time.After(testwait.Bound):
			t.Fatalf("%s: no answer", tc.name)
		}
	}
	resources := 0
	for _, rec := range fs.Taken() {
		var req collogspb.ExportLogsServiceRequest
		if _, b, err := telemetry.Decode(rec); err != nil || proto.Unmarshal(b, &req) != nil {
			t.Fatalf("spooled a record that is not a logs request: %v", err)
		}
		resources += len(req.ResourceLogs)
	}
	if resources != 8+1 {
		t.Fatalf("%d resources spooled, want the 8 of the slow body and the small one", resources)
	}
}
