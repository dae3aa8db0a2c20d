package serve

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
)

// Clients that send half a request and stay (or reset and come back, in a
// loop) are served DefaultMaxConns at a time: the rest wait in the
// kernel's accept queue, where they cost the server nothing, and are
// served as connections end. Before, every one was accepted at once,
// each with its request's buffers: 100 such clients resetting in a loop
// took `xfer serve --http` to 366 MB RSS (issue 23 item 6; after: 44 MB).
func TestHTTPListenersServeAtMostMaxConns(t *testing.T) {
	store, err := diskstore.Open(t.TempDir(), diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := Start(store, Listen{HTTP: "127.0.0.1:0", TUS: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i, addr := range []string{srv.Addrs.TUS, srv.Addrs.HTTP} { // the order Start limits them in
		l := srv.limited[i]
		var hostile []net.Conn
		for k := range DefaultMaxConns + 44 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			hostile = append(hostile, c)
			fmt.Fprintf(c, "POST /post/h%d HTTP/1.1\r\nHost: x\r\nContent-Le", k) // half a header, then nothing
		}
		testwait.For(t, "the listener to serve its limit of connections", func() bool { return l.Open() == DefaultMaxConns })
		if n := l.Open(); n != DefaultMaxConns {
			t.Fatalf("%s: %d connections served at once, want %d", addr, n, DefaultMaxConns)
		}
		// Once they go, a well-behaved client is served.
		for _, c := range hostile {
			c.Close()
		}
		if addr == srv.Addrs.HTTP {
			one := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle connection left open
			resp, err := one.Post("http://"+addr+"/post/good", "application/octet-stream", bytes.NewReader(make([]byte, 64<<10)))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("well-behaved POST after the attack: %s %s", resp.Status, body)
			}
		}
		testwait.For(t, "the hostile connections to be released", func() bool { return l.Open() == 0 })
	}
}
