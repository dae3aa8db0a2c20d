package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// xfer send ends at once on refusals no retry fixes, and says what a
// refused connection likely means without claiming an interrupted upload.
// Before issue 24: to a URL without /files/, 19 retries over ~45 s, then
// "server: POST: 404 Not Found 404 page not found"; to a port nothing
// listens on, 20 retries, each "upload interrupted; resuming from the
// server's offset" although nothing was sent.
func TestXferSendGivesUp(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	statusFor := map[string]int{"/404": 404, "/405": 405, "/401": 401, "/403": 403, "/413": 413, "/415": 415}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, ok := statusFor[r.URL.Path]
		if !ok {
			code = 404
		}
		http.Error(w, http.StatusText(code), code)
	})}
	go srv.Serve(lis)
	defer srv.Close()
	web := "http://" + lis.Addr().String()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	state := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", state)
	for _, c := range []struct {
		to, want string
		retries  int
	}{
		{web, "404 Not Found Not Found: no tus endpoint there; `sluice xfer serve` takes uploads at http://HOST:PORT/files/", 0},
		{web + "/405", "405 Method Not Allowed", 0},
		{web + "/401", "401 Unauthorized", 0},
		{web + "/403", "403 Forbidden", 0},
		{web + "/413", "413 Request Entity Too Large", 0},
		{web + "/415", "415 Unsupported Media Type", 0},
		{"grpc://" + lis.Addr().String(), "does not speak this transport", 0},
		{"http://" + deadAddr + "/files/", "connection refused: is `sluice xfer serve` running at http://" + deadAddr + "/files/?", 4},
		{"grpc://" + deadAddr, "is `sluice xfer serve` running at grpc://" + deadAddr + "?", 4},
	} {
		code, out, errOut := run("xfer", "send", "--to", c.to, file)
		if code != 1 || out != "" || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "upload interrupted") ||
			strings.Count(errOut, "cannot connect; retrying") != c.retries {
			t.Errorf("xfer send --to %s: exit %d, stdout %q, stderr:\n%s\nwant exit 1, %q, %d retries and no 'upload interrupted'", c.to, code, out, errOut, c.want, c.retries)
		}
	}
}
