package tck

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"
)

// serve runs the echo responder of `sluice rsocket serve` on url's scheme
// and returns the URL with the port.
func serve(t *testing.T, scheme string, opts ...rsocket.Option) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u := scheme + "://127.0.0.1:0"
	if scheme == "ws" || scheme == "wss" {
		u += "/rsocket"
	}
	ln, path, err := rsocket.Listen(u)
	if err != nil {
		t.Fatal(err)
	}
	if path != "" {
		go rsocket.ServeWebSocket(ctx, ln, path, &echo.Responder{}, opts...)
	} else {
		go rsocket.Serve(ctx, ln, &echo.Responder{}, opts...)
	}
	return scheme + "://" + ln.Addr().String() + path
}

// TestOurServerConforms: every check passes against our own server, over
// each transport (lease and resume are checked with servers that have
// them, their refusal with servers that have not).
func TestOurServerConforms(t *testing.T) {
	ca := testpki.NewCA(t)
	cert := ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{cert}}
	cliTLS := &tls.Config{RootCAs: ca.Pool()}
	for _, tc := range []struct {
		scheme string
		opts   []rsocket.Option
		tls    *tls.Config
	}{
		// 16 KiB frames: the 100 KB echo of fragmented-request comes back
		// in fragments, which fragments-metadata-first then judges.
		// Lease (5 requests, so lease-exhausted can use them up) and
		// resume on tcp and ws, neither on tls and wss: each check that
		// needs one, or its absence, runs on two transports.
		{"tcp", []rsocket.Option{rsocket.WithLease(10*time.Second, 5), rsocket.WithResume(rsocket.ResumeConfig{}), rsocket.WithMaxFrameSize(16 << 10)}, nil},
		{"ws", []rsocket.Option{rsocket.WithLease(10*time.Second, 5), rsocket.WithResume(rsocket.ResumeConfig{}), rsocket.WithMaxFrameSize(16 << 10)}, nil},
		{"tls", []rsocket.Option{rsocket.WithTLS(srvTLS)}, cliTLS},
		{"wss", []rsocket.Option{rsocket.WithTLS(srvTLS)}, cliTLS},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			u := serve(t, tc.scheme, tc.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep := Run(ctx, Config{URL: u, TLS: tc.tls, Timeout: 10 * time.Second, Quiet: 100 * time.Millisecond})
			var b bytes.Buffer
			_ = rep.WriteTable(&b)
			t.Log("\n" + b.String())
			for _, r := range rep.Results {
				want := Pass
				switch r.ID {
				case "server-stream-ids":
					want = Skip // the echo server sends no request
				case "fragments-metadata-first":
					if tc.tls != nil {
						want = Skip // full-size frames: nothing fragmented
					}
				case "setup-lease", "lease-exhausted", "lease-after-resume":
					if tc.tls != nil {
						want = Skip // these servers run without lease: UNSUPPORTED_SETUP
					}
				case "setup-lease-refused", "setup-resume":
					if tc.tls == nil {
						want = Skip // these servers do lease and resume
					}
				}
				if r.Status != want {
					t.Errorf("%s: %s (%s), want %s", r.ID, r.Status, r.Detail, want)
				}
			}
			if len(rep.Results) != len(IDs()) {
				t.Errorf("%d results for %d checks", len(rep.Results), len(IDs()))
			}
		})
	}
}

// TestRunnerCatchesBrokenServer: against a server that breaks rules (no
// server at all speaks wrong on purpose here, so a raw listener that
// answers nothing stands in), checks fail instead of passing.
func TestRunnerCatchesSilentServer(t *testing.T) {
	ln, _, err := rsocket.Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // reads everything, says nothing
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep := Run(ctx, Config{URL: "tcp://" + ln.Addr().String(), Timeout: 300 * time.Millisecond, Quiet: 50 * time.Millisecond,
		Only: []string{"setup-first", "keepalive-echo", "request-n-exact", "echo-contract"}})
	got := map[string]Status{}
	for _, r := range rep.Results {
		got[r.ID] = r.Status
	}
	if got["setup-first"] != Fail || got["keepalive-echo"] != Fail || got["request-n-exact"] != Skip || got["echo-contract"] != Skip {
		t.Fatalf("against a silent server: %v", got)
	}
	if !rep.Failed() {
		t.Fatal("Failed() is false")
	}
	var b strings.Builder
	_ = rep.WriteTable(&b)
	if !strings.Contains(b.String(), "FAIL") {
		t.Fatalf("table: %s", b.String())
	}
}
