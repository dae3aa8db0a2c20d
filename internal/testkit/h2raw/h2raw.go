// Package h2raw is an HTTP/2 client that speaks the frames itself, for
// tests that must do what a gRPC client never does: begin a message and
// stop in the middle of it, or trickle it. It answers SETTINGS and pings,
// as a live client's transport does, and keeps to the server's
// flow-control windows.
package h2raw

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// Client is one HTTP/2 connection.
type Client struct {
	c   net.Conn
	fr  *http2.Framer
	wmu sync.Mutex // writes
	// Closed is closed once the server closed the connection (a read
	// failed).
	Closed chan struct{}

	mu      sync.Mutex // the server's windows
	connWin int64
	initWin int64
	winAdd  map[uint32]int64 // WINDOW_UPDATEs per stream
	sent    map[uint32]int64 // DATA bytes per stream
}

// Start speaks HTTP/2 on c (closed when the test ends): the preface, its
// SETTINGS with window as its own initial stream window and the
// connection's window raised to it (0: HTTP/2's default, 65,535), then
// reads the server's frames until the connection closes.
func Start(t *testing.T, c net.Conn, window uint32) *Client {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	r := &Client{c: c, fr: http2.NewFramer(c, c), Closed: make(chan struct{}),
		connWin: 65535, initWin: 65535, winAdd: map[uint32]int64{}, sent: map[uint32]int64{}}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if window > 0 {
		r.write(func() error {
			return r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
		})
		r.write(func() error { return r.fr.WriteWindowUpdate(0, window) })
	} else {
		r.write(func() error { return r.fr.WriteSettings() })
	}
	go r.readLoop()
	return r
}

func (r *Client) readLoop() {
	defer close(r.Closed)
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					r.mu.Lock()
					r.initWin = int64(v)
					r.mu.Unlock()
				}
				r.write(r.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				r.write(func() error { return r.fr.WritePing(true, f.Data) })
			}
		case *http2.WindowUpdateFrame:
			r.mu.Lock()
			if f.StreamID == 0 {
				r.connWin += int64(f.Increment)
			} else {
				r.winAdd[f.StreamID] += int64(f.Increment)
			}
			r.mu.Unlock()
		}
	}
}

func (r *Client) write(f func() error) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	f() // a write error shows as the connection closing
}

// Open starts a gRPC call of path (a full method name) on stream id.
func (r *Client) Open(id uint32, path, authority string) {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	r.write(func() error {
		return r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
	})
}

// Data sends p on stream id in frames of at most 16 KiB, each once the
// server's windows let it.
func (r *Client) Data(t *testing.T, id uint32, p []byte) {
	t.Helper()
	for len(p) > 0 {
		var n int
		testwait.For(t, "the server to open its window", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			n = int(min(int64(len(p)), 16<<10, r.connWin, r.initWin+r.winAdd[id]-r.sent[id]))
			return n > 0
		})
		r.mu.Lock()
		r.connWin -= int64(n)
		r.sent[id] += int64(n)
		r.mu.Unlock()
		chunk := p[:n]
		r.write(func() error { return r.fr.WriteData(id, false, chunk) })
		p = p[n:]
	}
}

// Close closes the connection.
func (r *Client) Close() error { return r.c.Close() }

// End ends the client's side of stream id.
func (r *Client) End(id uint32) {
	r.write(func() error { return r.fr.WriteData(id, true, nil) })
}

// WaitClosed fails the test unless the server closes the connection
// within testwait.Bound.
func (r *Client) WaitClosed(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.Closed:
	case <-time.After(testwait.Bound):
		t.Fatalf("the server did not close %s", what)
	}
}
