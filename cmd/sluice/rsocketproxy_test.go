package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// startRSocketProxy runs `sluice rsocket proxy` in this process in front
// of backends (tcp:// URLs) and returns its host:port.
func startRSocketProxy(t *testing.T, backends []string, extra ...string) string {
	t.Helper()
	args := append([]string{"--listen", "tcp://127.0.0.1:0", "--backends", strings.Join(backends, ","), "--log-level", "error"}, extra...)
	u := startListening(t, "proxy", 1, func(ctx context.Context, stdout io.Writer) error {
		return rsocketProxy(ctx, args, stdout, io.Discard)
	})[0]
	return strings.TrimPrefix(u, "tcp://")
}

// TestRSocketProxyResume: three `rsocket serve --resume` servers, each
// with only its own sessions, behind `rsocket proxy`; clients stream
// through a link that breaks mid-stream again and again, and every
// RESUME reaches the server holding its session: each stream arrives
// complete, in order, once. With --affinity=false (round-robin, what a
// plain TCP balancer does) the first RESUME lands on a server that never
// saw the token and the stream fails: the routing is what makes it work.
func TestRSocketProxyResume(t *testing.T) {
	var backends []string
	for range 3 {
		u, _ := startRSocketServe(t, "--resume")
		backends = append(backends, u)
	}
	const clients, n, cuts = 4, 20_000, 12
	proxy := startRSocketProxy(t, backends)
	link := cuttingProxy(t, proxy, cuts, 10_000)
	for c := range clients {
		code, out, errs := run("rsocket", "stream", "--data", strconv.Itoa(n), "--resume", "--url", "tcp://"+link.Addr())
		if code != 0 || errs != "" {
			t.Fatalf("client %d: exit %d, stderr %q", c, code, errs)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("client %d: %d elements, want %d", c, len(lines), n)
		}
		for i, l := range lines {
			if l != strconv.Itoa(i) {
				t.Fatalf("client %d: element %d is %q: lost, reordered or duplicated", c, i, l)
			}
		}
	}
	if got := link.Cuts(); got != cuts {
		t.Fatalf("the link broke %d times, want %d (the streams must outlast the cuts)", got, cuts)
	}

	rr := startRSocketProxy(t, backends, "--affinity=false")
	link = cuttingProxy(t, rr, 1, 30_000)
	code, _, errs := run("rsocket", "stream", "--data", strconv.Itoa(n), "--resume", "--url", "tcp://"+link.Addr())
	if code == 0 || !strings.Contains(errs, "resume rejected: unknown resume token") {
		t.Fatalf("round-robin proxy: exit %d, stderr %q; want the resume rejected by a server without the session", code, errs)
	}
}

func TestRSocketProxyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"rsocket", "proxy", "--backends", "tcp://127.0.0.1:1"}, "--listen tcp://HOST:PORT is required"},
		{[]string{"rsocket", "proxy", "--listen", "tls://127.0.0.1:0", "--backends", "tcp://127.0.0.1:1"}, "cannot balance TLS"},
		{[]string{"rsocket", "proxy", "--listen", "tcp://127.0.0.1:0"}, "--backends is required"},
		{[]string{"rsocket", "proxy", "--listen", "tcp://127.0.0.1:0", "--backends", "ws://127.0.0.1:1/x"}, "is not tcp://HOST:PORT"},
	} {
		if code, _, errs := run(tc.args...); code != 2 || !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.msg)
		}
	}
}

// TestRSocketProxyNoServer: with no server reachable, the proxy's
// /readyz answers 503 naming the server and why, and a client's SETUP is
// answered REJECTED_SETUP naming it, which the client prints (before: /readyz 200, and the client
// saw its connection reset); with a server up, /readyz answers 200.
func TestRSocketProxyNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	readyz := func(backend string) (int, string) {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		metrics := l.Addr().String()
		l.Close()
		proxy := startRSocketProxy(t, []string{backend}, "--metrics", metrics)
		// The metrics listener is bound before the proxy's, whose line
		// startRSocketProxy waited for.
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if backend == "tcp://"+dead {
			code, _, errs := run("rsocket", "rr", "--data", "x", "--url", "tcp://"+proxy)
			if code != 1 || !strings.Contains(errs, "no RSocket server reachable: "+dead) {
				t.Errorf("rr through the proxy of a down server: exit %d, stderr %q; want the proxy's answer naming %s", code, errs, dead)
			}
		}
		return resp.StatusCode, string(body)
	}
	if code, body := readyz("tcp://" + dead); code != http.StatusServiceUnavailable || !strings.Contains(body, dead+": connect: connection refused") ||
		strings.Count(strings.TrimSpace(body), "\n") != 0 {
		t.Errorf("/readyz with the only server down: %d %q; want 503 and one line naming it", code, body)
	}
	live, _ := startRSocketServe(t)
	if code, body := readyz(live); code != http.StatusOK {
		t.Errorf("/readyz with the server up: %d %q; want 200", code, body)
	}
}
