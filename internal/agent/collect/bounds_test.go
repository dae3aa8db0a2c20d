package collect

import (
	"io"
	"net/http"
	"testing"

	"github.com/klauspost/compress/snappy"
)

// endpoints are the collectors' HTTP endpoints, each with a
// Content-Type it serves.
var endpoints = []struct{ path, ct string }{
	{"/api/v1/write", "application/x-protobuf"},
	{"/v1/metrics", "application/x-protobuf"},
	{"/v1/logs", "application/json"},
	{"/v1/traces", "application/x-protobuf"},
}

// zeros reads as n zero bytes without holding them.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.n)]
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

// TestOversizedBodies: a body of 64 MiB + 1 bytes sent as is (chunked:
// no Content-Length to refuse it by) is 413 on every endpoint once the
// bound is read, with nothing spooled; without the bound it would be
// read whole and found malformed (400), or worse, held and stored.
func TestOversizedBodies(t *testing.T) {
	fs, srv := serve(t, nil)
	for _, ep := range endpoints {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+ep.path, &zeros{n: maxBody + 1})
		req.Header.Set("Content-Type", ep.ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", ep.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: a body of %d bytes: %d, want 413", ep.path, maxBody+1, resp.StatusCode)
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of oversized bodies", n)
	}
}

// TestCompressionBombs: on every endpoint, a body that decodes past
// 64 MiB is 413 and nothing is spooled: gzip on OTLP/HTTP once the bound
// is decoded, snappy on remote-write from the length its block declares;
// without the bounds the OTLP bodies would decode whole (a few KiB of
// gzip to 64 MiB and beyond).
func TestCompressionBombs(t *testing.T) {
	fs, srv := serve(t, nil)
	gzipBomb := gzipped(make([]byte, maxBody+1))
	for _, ep := range endpoints {
		enc, body := "gzip", gzipBomb
		if ep.path == "/api/v1/write" {
			enc, body = "snappy", snappyBomb()
		}
		if resp, answer := post(t, srv.URL+ep.path, ep.ct, enc, body); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %s bomb: %d (%s), want 413", ep.path, enc, resp.StatusCode, answer)
		}
	}
	// A snappy block that declares its true size, over the bound: refused
	// from the header too (the sender compressed 64 MiB + 1 bytes).
	big := snappy.Encode(nil, make([]byte, maxBody+1))
	if resp, _ := post(t, srv.URL+"/api/v1/write", "", "snappy", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("snappy block of %d decoded bytes: %d, want 413", maxBody+1, resp.StatusCode)
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of compression bombs", n)
	}
}

// TestMalformedBodies: on every endpoint, a body that is not the
// endpoint's message is 400 with nothing spooled (remote-write: snappy
// of garbage; OTLP: garbage protobuf, broken JSON, corrupt gzip).
func TestMalformedBodies(t *testing.T) {
	fs, srv := serve(t, nil)
	for _, ep := range endpoints {
		cases := map[string][]byte{"garbage": []byte("\x0a\xff\xff\xff")}
		enc := ""
		switch {
		case ep.path == "/api/v1/write":
			cases = map[string][]byte{"snappy of garbage": snappy.Encode(nil, []byte("\x0a\xff\xff\xff")), "not snappy": []byte("\xff\xff\xff\xff\xff\xff")}
		case ep.ct == "application/json":
			cases = map[string][]byte{"broken JSON": []byte(`{"resourceLogs":[`)}
		}
		for name, body := range cases {
			if resp, answer := post(t, srv.URL+ep.path, ep.ct, enc, body); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: %s: %d (%s), want 400", ep.path, name, resp.StatusCode, answer)
			}
		}
		if ep.path != "/api/v1/write" {
			if resp, answer := post(t, srv.URL+ep.path, ep.ct, "gzip", []byte("not gzip")); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: corrupt gzip: %d (%s), want 400", ep.path, resp.StatusCode, answer)
			}
		}
	}
	if n := len(fs.Taken()); n != 0 {
		t.Fatalf("%d records spooled of malformed bodies", n)
	}
}
