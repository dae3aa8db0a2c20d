package agent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/testkit/testpki"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// TestIngestContentEncoding: gzip and zstd bodies are decoded before they
// are split into records (they used to be stored compressed, with 200);
// unknown encodings are 415, corrupt ones 400, and a body decoding past
// MaxRequestBytes (a decompression bomb) 413 with nothing spooled.
func TestIngestContentEncoding(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), nil)
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	post := func(enc string, body []byte) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/records", bytes.NewReader(body))
		if enc != "" {
			req.Header.Set("Content-Encoding", enc)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	plain := []byte("alpha\nbeta\n")
	bomb := make([]byte, MaxRequestBytes+1) // zeros: a few KB compressed
	for _, tc := range []struct {
		name, enc string
		body      []byte
		want      int
	}{
		{"identity", "identity", plain, 200},
		{"gzip", "gzip", gzipped(t, plain), 200},
		{"zstd", "ZSTD", zstded(t, plain), 200},
		{"brotli", "br", plain, 415},
		{"chained", "gzip, zstd", plain, 415},
		{"corrupt gzip", "gzip", []byte("not gzip at all"), 400},
		{"corrupt zstd", "zstd", []byte("not zstd at all"), 400},
		{"gzip bomb", "gzip", gzipped(t, bomb), 413},
		{"zstd bomb", "zstd", zstded(t, bomb), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, msg := post(tc.enc, tc.body); got != tc.want {
				t.Fatalf("status %d (%s), want %d", got, strings.TrimSpace(msg), tc.want)
			}
		})
	}
	want := "alpha,beta,alpha,beta,alpha,beta"
	if got := strings.Join(spooledRecords(t, a), ","); got != want {
		t.Fatalf("spooled %q, want %q", got, want)
	}
}

const ingestToken = "ingest-token-0123456789"

// TestIngestTLSAndToken: with IngestTokens set, ingest needs a known
// bearer token (401 otherwise, nothing spooled), here over TLS with the
// server configuration the CLI builds from --ingest-tls-cert/-key.
func TestIngestTLSAndToken(t *testing.T) {
	tokens, err := auth.ParseTokens(strings.NewReader(ingestToken + " collector-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.IngestTokens = tokens })
	defer a.Close()
	certFile, keyFile, pool := testpki.SelfSigned(t, t.TempDir())
	tlsCfg, err := auth.ServerTLS(certFile, keyFile, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(a.Handler())
	srv.TLS = tlsCfg
	srv.StartTLS()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(authz ...string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/records", strings.NewReader("rec\n"))
		for _, v := range authz {
			req.Header.Add("Authorization", v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name  string
		authz []string
		want  int
	}{
		{"no token", nil, 401},
		{"unknown token", []string{"Bearer wrong-token-0123456789"}, 401},
		{"not bearer", []string{"Basic " + ingestToken}, 401},
		{"two headers", []string{"Bearer " + ingestToken, "Bearer " + ingestToken}, 401},
		{"valid token", []string{"Bearer " + ingestToken}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := post(tc.authz...); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
	if got := spooledRecords(t, a); len(got) != 1 {
		t.Fatalf("spooled %q, want the one authorised record", got)
	}
	// Plain HTTP to the TLS listener is refused by the TLS layer.
	if resp, err := http.Post("http://"+srv.Listener.Addr().String()+"/v1/records", "", strings.NewReader("x\n")); err == nil {
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP accepted on the TLS listener")
		}
		resp.Body.Close()
	}
}

// TestIngestStalledBody: an ingest request that declares a 64 MiB body,
// sends a few records and then nothing (a client frozen mid-body, or gone
// without a FIN) ends with 408 once its body has been silent for the idle
// timeout, and nothing of it is spooled. Before, the handler waited for
// as long as the connection lasted, with a 64 MiB buffer reserved for the
// declared length (scripts/stalled-senders.sh ingest measures it).
func TestIngestStalledBody(t *testing.T) {
	a := newTestAgent(t, t.TempDir(), func(c *Config) { c.bodyIdle = 50 * time.Millisecond })
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/records HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nfirst\nsecond\n", 64<<20)
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // without the idle timeout: fail, not hang
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the stalled request got no answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %d, want 408", resp.StatusCode)
	}
	if n := a.spool.Log().NextOffset(); n != 0 {
		t.Fatalf("a part of the stalled request was spooled: %d messages", n)
	}
}
