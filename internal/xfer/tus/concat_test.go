package tus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/testkit/s3test"
	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/s3store"
	"github.com/sluicehq/sluice/internal/xfer/tus"
)

// s3env is a tus server over an S3 store in the test binary's SeaweedFS,
// under a prefix of the test's own, with the store's defaults.
type s3env struct {
	t     *testing.T
	store *s3store.Store
	c     *s3.Client
	loc   s3store.Location
	url   string // the tus endpoint, ".../files/"
}

func startS3(t *testing.T) *s3env {
	t.Helper()
	st := s3test.Start(t)
	prefix := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + rand.Text()[:8]
	loc, err := s3store.ParseURL(st.URL(prefix))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s3store.Client(loc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := s3store.Open(loc, c, s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(tus.Handler(s, "/files/"))
	t.Cleanup(srv.Close)
	return &s3env{t: t, store: s, c: c, loc: loc, url: srv.URL + "/files/"}
}

// object is the object name in the store (an error when there is none).
func (e *s3env) object(name string) ([]byte, error) {
	key := e.loc.Prefix + name
	out, err := e.c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &e.loc.Bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// do sends a tus request and returns the answer, its body read.
func do(t *testing.T, method, url string, body []byte, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Tus-Resumable", tus.Version)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

func bodyOf(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

// partial creates a partial upload of data and sends all of it unless
// keep is set (then it stays unfinished); it returns its URL.
func (e *s3env) partial(data []byte, send bool) string {
	e.t.Helper()
	r := do(e.t, "POST", e.url, nil, "Upload-Concat", "partial", "Upload-Length", strconv.Itoa(len(data)))
	loc := r.Header.Get("Location")
	if r.StatusCode != http.StatusCreated || loc == "" {
		e.t.Fatalf("creating a partial upload: %s %s", r.Status, bodyOf(r))
	}
	abs := strings.TrimSuffix(e.url, "/files/") + loc
	if send {
		r = do(e.t, "PATCH", abs, data, "Content-Type", "application/offset+octet-stream", "Upload-Offset", "0")
		if r.StatusCode != http.StatusNoContent {
			e.t.Fatalf("PATCH of a partial upload: %s %s", r.Status, bodyOf(r))
		}
	}
	return abs
}

func metaOf(name string, sha []byte) string {
	m := "filename " + base64.StdEncoding.EncodeToString([]byte(name))
	if sha != nil {
		m += ",sha256 " + base64.StdEncoding.EncodeToString([]byte(hex.EncodeToString(sha)))
	}
	return m
}

// TestTusConcatS3 joins two partial uploads, one of them smaller than
// S3's smallest part, into a final upload, as the concatenation
// extension describes: the file appears whole under its name, HEAD of the
// final upload names its partials, a PATCH to it is forbidden, and the
// partials are gone.
func TestTusConcatS3(t *testing.T) {
	e := startS3(t)
	r := do(t, "OPTIONS", e.url, nil)
	if !strings.Contains(r.Header.Get("Tus-Extension"), "concatenation") {
		t.Fatalf("Tus-Extension %q over the S3 store lacks concatenation", r.Header.Get("Tus-Extension"))
	}
	data := xfertest.RandBytes(6<<20+123, 41)
	cut := 2<<20 + 7
	p1, p2 := e.partial(data[:cut], true), e.partial(data[cut:], true)
	if r := do(t, "HEAD", p1, nil); r.Header.Get("Upload-Concat") != "partial" || r.Header.Get("Upload-Offset") != strconv.Itoa(cut) {
		t.Fatalf("HEAD of a finished partial upload: %s, Upload-Concat %q, Upload-Offset %q", r.Status, r.Header.Get("Upload-Concat"), r.Header.Get("Upload-Offset"))
	}
	if _, err := e.object(strings.TrimPrefix(p1, strings.TrimSuffix(e.url, "files/"))); err == nil {
		t.Fatal("a partial upload is visible under a name")
	}
	r = do(t, "POST", e.url, nil, "Upload-Concat", "final;"+p1+" "+p2, "Upload-Metadata", metaOf("joined.bin", sha256Of(data)))
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("final upload: %s %s", r.Status, bodyOf(r))
	}
	final := strings.TrimSuffix(e.url, "/files/") + r.Header.Get("Location")
	got, err := e.object("joined.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the joined file: %d bytes (want %d), %v", len(got), len(data), err)
	}
	r = do(t, "HEAD", final, nil)
	wantConcat := "final;" + strings.TrimPrefix(p1, strings.TrimSuffix(e.url, "/files/")) + " " + strings.TrimPrefix(p2, strings.TrimSuffix(e.url, "/files/"))
	if r.StatusCode != http.StatusOK || r.Header.Get("Upload-Concat") != wantConcat ||
		r.Header.Get("Upload-Length") != strconv.Itoa(len(data)) || r.Header.Get("Upload-Offset") != strconv.Itoa(len(data)) {
		t.Fatalf("HEAD of the final upload: %s, Upload-Concat %q (want %q), length %q, offset %q", r.Status,
			r.Header.Get("Upload-Concat"), wantConcat, r.Header.Get("Upload-Length"), r.Header.Get("Upload-Offset"))
	}
	r = do(t, "PATCH", final, nil, "Content-Type", "application/offset+octet-stream", "Upload-Offset", strconv.Itoa(len(data)))
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("PATCH of a final upload: %s, want 403 Forbidden", r.Status)
	}
	for _, p := range []string{p1, p2} {
		if r := do(t, "HEAD", p, nil); r.StatusCode != http.StatusNotFound {
			t.Fatalf("HEAD of a concatenated partial upload: %s, want 404 (the final upload used it)", r.Status)
		}
	}
}

// TestTusConcatRefusals: what the concatenation extension says a server
// must refuse, and what this one refuses besides, each with nothing
// landed.
func TestTusConcatRefusals(t *testing.T) {
	e := startS3(t)
	data := xfertest.RandBytes(1<<20, 42)
	done := e.partial(data, true)
	open := e.partial(data, false)
	base := strings.TrimSuffix(e.url, "/files/")
	for _, c := range []struct {
		what   string
		status int
		hdr    []string
	}{
		{"Upload-Length with final", 400, []string{"Upload-Concat", "final;" + done, "Upload-Length", "5"}},
		{"an unfinished partial", 400, []string{"Upload-Concat", "final;" + done + " " + open}},
		{"an unknown upload", 400, []string{"Upload-Concat", "final;" + base + "/files/0123456789abcdef"}},
		{"an URL of another path", 400, []string{"Upload-Concat", "final;" + base + "/other/" + strings.TrimPrefix(done, base+"/files/")}},
		{"no URL", 400, []string{"Upload-Concat", "final;"}},
		{"neither partial nor final", 400, []string{"Upload-Concat", "whole", "Upload-Length", "5"}},
		{"partial without a length", 400, []string{"Upload-Concat", "partial"}},
		{"a wrong SHA-256", 460, []string{"Upload-Concat", "final;" + done, "Upload-Metadata", metaOf("bad.bin", make([]byte, 32))}},
	} {
		hdr := append([]string{"Upload-Metadata", metaOf("bad.bin", nil)}, c.hdr...)
		if r := do(t, "POST", e.url, nil, hdr...); r.StatusCode != c.status {
			t.Errorf("%s: %s %s, want %d", c.what, r.Status, bodyOf(r), c.status)
		}
	}
	if _, err := e.object("bad.bin"); err == nil {
		t.Fatal("a refused final upload is visible")
	}
	// Refused, the partial upload is still there to be used.
	if r := do(t, "POST", e.url, nil, "Upload-Concat", "final;"+done, "Upload-Metadata", metaOf("ok.bin", nil)); r.StatusCode != http.StatusCreated {
		t.Fatalf("final upload after the refusals: %s %s", r.Status, bodyOf(r))
	}
}

// TestTusConcatNotOnDisk: the disk store does not join uploads, so the
// server over it does not advertise concatenation and refuses it.
func TestTusConcatNotOnDisk(t *testing.T) {
	e := startEnv(t, diskstore.Options{})
	url := "http://" + e.Srv.Addrs.TUS + "/files/"
	if r := do(t, "OPTIONS", url, nil); strings.Contains(r.Header.Get("Tus-Extension"), "concatenation") {
		t.Fatalf("Tus-Extension %q over the disk store", r.Header.Get("Tus-Extension"))
	}
	r := do(t, "POST", url, nil, "Upload-Concat", "partial", "Upload-Length", "5")
	if r.StatusCode != http.StatusBadRequest {
		t.Fatalf("Upload-Concat over the disk store: %s, want 400", r.Status)
	}
	if fmt.Sprint(partialFiles(t, e.Dir)) != "[]" {
		t.Fatalf("a refused partial upload left %v", partialFiles(t, e.Dir))
	}
}
