package hostile_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/sluicehq/sluice/internal/lab/hostile"
)

// TestFloodsHoldTheConnection: flood and never-reads keep their
// connection once every request or stream is sent, reading nothing, over
// HTTP/2 and HTTP/1.1: a server that closes the connection after reading
// them all is seen closing it (the client's next write fails). Before,
// the client closed it itself as soon as its requests were sent (all but
// HTTP/1.1's never-reads), so the server saw a burst and an EOF and held
// nothing: the sink's never-reads rows measured no Read stream waiting
// for a client that does not read (found on 2026-11-29: the sink ran 14
// goroutines during such an attack, none of them a Read).
func TestFloodsHoldTheConnection(t *testing.T) {
	const conns = 2
	for _, c := range []struct {
		target   string
		mode     hostile.Mode
		requests int
		read     func(net.Conn, int) bool
	}{
		{"sink", hostile.Flood, 10, readStreamsThenClose},
		{"sink", hostile.NeverReads, 10, readStreamsThenClose},
		{"ingest", hostile.Flood, 10, readRequestsThenClose},
		{"ingest", hostile.NeverReads, 1, readRequestsThenClose},
	} {
		t.Run(c.target+"/"+string(c.mode), func(t *testing.T) {
			addr, clientFirst, stop, err := hostile.ClosingServer(func(nc net.Conn) bool { return c.read(nc, c.requests) })
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			rep, err := hostile.Run(context.Background(), hostile.Config{Addr: addr, Target: target(t, c.target),
				Mode: c.mode, Conns: conns, Duration: time.Minute, MaxRequests: c.requests})
			if err != nil {
				t.Fatal(err)
			}
			if n := clientFirst(conns); n > 0 || rep.Closed != conns {
				t.Errorf("%+v: the client closed %d connections first, the server closed %d as the client saw it; want 0 and %d", rep, n, rep.Closed, conns)
			}
		})
	}
}

// readStreamsThenClose reads the HTTP/2 client preface and frames until
// n streams were opened; it reports whether the client closed its side
// first.
func readStreamsThenClose(c net.Conn, n int) (eof bool) {
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		return true
	}
	fr := http2.NewFramer(io.Discard, c)
	for opened := 0; opened < n; {
		f, err := fr.ReadFrame()
		if err != nil {
			return true
		}
		if _, ok := f.(*http2.HeadersFrame); ok {
			opened++
		}
	}
	return false
}

// readRequestsThenClose reads n HTTP/1.1 request heads (the floods'
// requests have no body); it reports whether the client closed its side
// first.
func readRequestsThenClose(c net.Conn, n int) (eof bool) {
	br := bufio.NewReader(c)
	for heads := 0; heads < n; {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return true
		}
		if bytes.Equal(line, []byte("\r\n")) {
			heads++
		}
	}
	return false
}
