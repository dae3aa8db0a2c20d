package rsocket

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testpki"
	"github.com/sluicehq/sluice/rsocket/internal/resumetest"
)

// serveTLS serves the echo responder over TLS on scheme (tls or wss) and
// returns its URL.
func serveTLS(t *testing.T, scheme string, cfg *tls.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u := scheme + "://127.0.0.1:0"
	if scheme == "wss" {
		u += "/rsocket"
	}
	ln, path, err := Listen(u)
	if err != nil {
		t.Fatal(err)
	}
	if scheme == "wss" {
		go ServeWebSocket(ctx, ln, path, newEcho(), WithTLS(cfg))
		return "wss://" + ln.Addr().String() + path
	}
	go Serve(ctx, ln, newEcho(), WithTLS(cfg))
	return "tls://" + ln.Addr().String()
}

func TestTLS(t *testing.T) {
	ca, other := testpki.NewCA(t), testpki.NewCA(t)
	srvCert := ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	for _, scheme := range []string{"tls", "wss"} {
		t.Run(scheme, func(t *testing.T) {
			u := serveTLS(t, scheme, &tls.Config{Certificates: []tls.Certificate{srvCert}})
			ctx := tctx(t)

			c, err := Dial(ctx, u, WithTLS(&tls.Config{RootCAs: ca.Pool()}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r, err := c.RequestResponse(ctx, Payload{Metadata: []byte("m"), Data: []byte("over tls")})
			if err != nil || string(r.Data) != "over tls" || string(r.Metadata) != "m" {
				t.Fatalf("request-response: %q %q %v", r.Metadata, r.Data, err)
			}
			s, err := c.RequestStream(ctx, Payload{Data: []byte("100")}, 7)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(collect(t, s), ","); got+"," != seq(100) {
				t.Fatalf("stream: %s", got)
			}

			// A server certificate from a CA the client does not trust:
			// Dial fails, and says why.
			_, err = Dial(ctx, u, WithTLS(&tls.Config{RootCAs: other.Pool()}))
			var verr *tls.CertificateVerificationError
			if !errors.As(err, &verr) || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
				t.Fatalf("dial with the wrong CA: %v; want a certificate verification error", err)
			}
		})
	}
}

func TestMutualTLS(t *testing.T) {
	ca := testpki.NewCA(t)
	srvCert := ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)
	cliCert := ca.Issue(t, "client", x509.ExtKeyUsageClientAuth)
	u := serveTLS(t, "tls", &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
	ctx := tctx(t)

	c, err := Dial(ctx, u, WithTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cliCert}}))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.RequestResponse(ctx, Payload{Data: []byte("mtls")}); err != nil || string(r.Data) != "mtls" {
		t.Fatalf("with a client certificate: %q %v", r.Data, err)
	}
	c.Close()

	// Without a client certificate the server refuses: with TLS 1.3 the
	// client learns it on its first read, so the request fails.
	c, err = Dial(ctx, u, WithTLS(&tls.Config{RootCAs: ca.Pool()}))
	if err == nil {
		_, err = c.RequestResponse(ctx, Payload{Data: []byte("x")})
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without a client certificate: %v; want a refusal naming the certificate", err)
	}
}

func TestTLSNeedsTLSURL(t *testing.T) {
	for _, u := range []string{"tcp://127.0.0.1:1", "ws://127.0.0.1:1/x"} {
		if _, err := Dial(tctx(t), u, WithTLS(&tls.Config{})); err == nil || !strings.Contains(err.Error(), "WithTLS needs a tls:// or wss:// URL") {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// TestTLSSilentClientDoesNotBlockAccept: a client that connects and never
// starts the handshake must not hold up the next one (handshakes run off
// the accept loop).
func TestTLSSilentClientDoesNotBlockAccept(t *testing.T) {
	ca := testpki.NewCA(t)
	u := serveTLS(t, "tls", &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "localhost", x509.ExtKeyUsageServerAuth)}})
	silent, err := net.Dial("tcp", strings.TrimPrefix(u, "tls://"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	ctx := tctx(t)
	c, err := Dial(ctx, u, WithTLS(&tls.Config{RootCAs: ca.Pool()}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r, err := c.RequestResponse(ctx, Payload{Data: []byte("next")}); err != nil || string(r.Data) != "next" {
		t.Fatalf("the client after a silent one: %q %v", r.Data, err)
	}
}

// TestResumeBindsTLSIdentity: with mutual TLS, a RESUME is accepted only
// from the client identity that set the session up. Another client of
// the same CA that presents the session's token is refused
// (REJECTED_RESUME "resume from another client identity") and the
// session stays with its owner, which still resumes through cuts.
func TestResumeBindsTLSIdentity(t *testing.T) {
	pki := resumetest.NewMTLS(t, testpki.NewCA(t))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, _, err := Listen("tls://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Serve(ctx, ln, newEcho(), WithTLS(pki.Server), WithResume(ResumeConfig{}))
	}()
	t.Cleanup(func() { cancel(); <-done })
	const cuts = 3
	p := newCutProxy(t, ln.Addr().String(), 7, 0, 0, 0) // no cuts until the thief has tried
	c := dialOwner(t, pki, "tls://"+p.Addr())

	resumetest.ThiefResumes(t, ln.Addr().String(), pki.Thief, pki.Token, withinBound)

	// The owner's session is untouched, and it resumes as itself.
	p.CutNext(randomCuts(7, cuts, 4<<10, 64<<10))
	p.CutAll()
	s, err := c.RequestStream(ctx, Payload{Data: []byte("20000")}, 256)
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the owner's stream", func() { err = readStream(s, 20000) })
	if err != nil {
		t.Fatal(err)
	}
	if st := c.ResumeStats(); st.Resumed < 1 {
		t.Fatalf("the owner resumed %d times after the cut, want at least 1", st.Resumed)
	}
}

// dialOwner dials url as m's owner, resumable with its token, and has
// one request answered; the connection closes with the test.
func dialOwner(t *testing.T, m resumetest.MTLS, url string) *Conn {
	t.Helper()
	ctx := context.Background()
	c, err := Dial(ctx, url, WithTLS(m.Owner),
		WithResume(ResumeConfig{Token: m.Token, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if r, err := c.RequestResponse(ctx, Payload{Data: []byte("mine")}); err != nil || string(r.Data) != "mine" {
		t.Fatalf("owner: %q %v", r.Data, err)
	}
	return c
}
