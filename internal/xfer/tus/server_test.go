package tus_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/tus"
)

type tusT struct {
	t   *testing.T
	url string
	dir string
	s   *diskstore.Uploads
}

func newTUS(t *testing.T, o diskstore.Options) *tusT { return newTUSIn(t, t.TempDir(), o) }

// newTUSIn serves a store on dir over tus.
func newTUSIn(t *testing.T, dir string, o diskstore.Options) *tusT {
	s := openT(t, dir, o)
	mux := http.NewServeMux()
	mux.Handle("/files/", tus.Handler(s, "/files/"))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &tusT{t: t, url: srv.URL, dir: dir, s: s}
}

func (c *tusT) do(method, path string, body []byte, hdr ...string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	req.Header.Set("Tus-Resumable", "1.0.0")
	for i := 0; i < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (c *tusT) want(resp *http.Response, code int) {
	c.t.Helper()
	if resp.StatusCode != code {
		c.t.Fatalf("%s %s: %d, want %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, code)
	}
}

func b64(s []byte) string { return base64.StdEncoding.EncodeToString(s) }

const octet = "application/offset+octet-stream"

// Every answer of the core protocol and the four extensions.
func TestTUSProtocol(t *testing.T) {
	c := newTUS(t, diskstore.Options{MaxSize: 1000, Expire: time.Hour})
	r := c.do("OPTIONS", "/files/", nil, "Tus-Resumable", "")
	c.want(r, 204)
	for k, v := range map[string]string{"Tus-Version": "1.0.0", "Tus-Extension": "creation,checksum,termination,expiration",
		"Tus-Checksum-Algorithm": "sha1,sha256,md5,crc32c", "Tus-Max-Size": "1000", "Tus-Resumable": "1.0.0"} {
		if got := r.Header.Get(k); got != v {
			t.Errorf("OPTIONS %s: %q, want %q", k, got, v)
		}
	}
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "10", "Tus-Resumable", ""), 412)
	r = c.do("POST", "/files/", nil, "Upload-Length", "10", "Tus-Resumable", "0.2.2")
	c.want(r, 412)
	if r.Header.Get("Tus-Version") != "1.0.0" {
		t.Error("412 without Tus-Version")
	}
	c.want(c.do("POST", "/files/", nil), 400)                          // no Upload-Length
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "1001"), 413) // over Tus-Max-Size
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "5", "Upload-Metadata", "filename "+b64([]byte("../x"))), 400)
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "5", "Upload-Metadata", "filename !!"), 400)

	data := []byte("hello, tus!")
	r = c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", "filename "+b64([]byte("greeting.txt"))+",empty,type "+b64([]byte("text/plain")))
	c.want(r, 201)
	loc := r.Header.Get("Location")
	if !strings.HasPrefix(loc, "/files/") || r.Header.Get("Upload-Expires") == "" {
		t.Fatalf("Location %q, Upload-Expires %q", loc, r.Header.Get("Upload-Expires"))
	}
	r = c.do("HEAD", loc, nil)
	c.want(r, 200)
	if r.Header.Get("Upload-Offset") != "0" || r.Header.Get("Upload-Length") != "11" || r.Header.Get("Cache-Control") != "no-store" || !strings.Contains(r.Header.Get("Upload-Metadata"), "filename") {
		t.Fatalf("HEAD headers %v", r.Header)
	}
	c.want(c.do("HEAD", "/files/nope", nil), 404)
	c.want(c.do("PATCH", "/files/nope", data, "Content-Type", octet, "Upload-Offset", "0"), 404)
	c.want(c.do("PATCH", loc, data[:5], "Content-Type", "application/octet-stream", "Upload-Offset", "0"), 415)
	c.want(c.do("PATCH", loc, data[:5], "Content-Type", octet, "Upload-Offset", "3"), 409)
	c.want(c.do("PATCH", loc, append(data, 'x'), "Content-Type", octet, "Upload-Offset", "0"), 413)
	c.want(c.do("PATCH", loc, data[:5], "Content-Type", octet, "Upload-Offset", "0", "Upload-Checksum", "crc32 AAAA"), 400)
	// A checksum mismatch keeps nothing of the PATCH.
	bad := sha1.Sum([]byte("other"))
	c.want(c.do("PATCH", loc, data[:5], "Content-Type", octet, "Upload-Offset", "0", "Upload-Checksum", "sha1 "+b64(bad[:])), 460)
	if r = c.do("HEAD", loc, nil); r.Header.Get("Upload-Offset") != "0" {
		t.Fatalf("offset %s after a 460", r.Header.Get("Upload-Offset"))
	}
	// Each algorithm, then the completion.
	s1 := sha1.Sum(data[:3])
	m5 := md5.Sum(data[3:6])
	s256 := sha256.Sum256(data[6:])
	r = c.do("PATCH", loc, data[:3], "Content-Type", octet, "Upload-Offset", "0", "Upload-Checksum", "sha1 "+b64(s1[:]))
	c.want(r, 204)
	if r.Header.Get("Upload-Offset") != "3" {
		t.Fatalf("Upload-Offset %q", r.Header.Get("Upload-Offset"))
	}
	c.want(c.do("PATCH", loc, data[3:6], "Content-Type", octet, "Upload-Offset", "3", "Upload-Checksum", "md5 "+b64(m5[:])), 204)
	r = c.do("PATCH", loc, data[6:], "Content-Type", octet, "Upload-Offset", "6", "Upload-Checksum", "sha256 "+b64(s256[:]))
	c.want(r, 204)
	whole := sha256.Sum256(data)
	if r.Header.Get("Sluice-Sha256") != hex.EncodeToString(whole[:]) {
		t.Fatalf("Sluice-Sha256 %q", r.Header.Get("Sluice-Sha256"))
	}
	if got, _ := os.ReadFile(filepath.Join(c.dir, "greeting.txt")); !bytes.Equal(got, data) {
		t.Fatalf("landed %q", got)
	}
	c.want(c.do("HEAD", loc, nil), 200) // kept until it expires: TestTUSFinishedUpload

	// No filename: the file is named by the upload id. Termination.
	r = c.do("POST", "/files/", nil, "Upload-Length", "4", "Upload-Metadata", "")
	c.want(r, 201)
	loc = r.Header.Get("Location")
	c.want(c.do("PATCH", loc, []byte("ab"), "Content-Type", octet, "Upload-Offset", "0"), 204)
	u, err := c.s.Acquire(context.Background(), strings.TrimPrefix(loc, "/files/"))
	if err != nil {
		t.Fatal(err)
	}
	c.want(c.do("PATCH", loc, []byte("cd"), "Content-Type", octet, "Upload-Offset", "2"), 423) // one writer
	u.Release()
	c.want(c.do("DELETE", loc, nil), 204)
	c.want(c.do("HEAD", loc, nil), 404)
	c.want(c.do("DELETE", loc, nil), 404)

	r = c.do("POST", "/files/", nil, "Upload-Length", "2")
	loc = r.Header.Get("Location")
	c.want(c.do("PATCH", loc, []byte("ok"), "Content-Type", octet, "Upload-Offset", "0"), 204)
	if _, err := os.Stat(filepath.Join(c.dir, strings.TrimPrefix(loc, "/files/"))); err != nil {
		t.Fatalf("upload without filename not named by its id: %v", err)
	}
	// A whole-file sha256 in the metadata that does not match: 460, nothing lands.
	r = c.do("POST", "/files/", nil, "Upload-Length", "2", "Upload-Metadata", "filename "+b64([]byte("v"))+",sha256 "+b64([]byte(hex.EncodeToString(whole[:]))))
	loc = r.Header.Get("Location")
	c.want(c.do("PATCH", loc, []byte("no"), "Content-Type", octet, "Upload-Offset", "0"), 460)
	if _, err := os.Stat(filepath.Join(c.dir, "v")); !os.IsNotExist(err) {
		t.Fatal("a mismatching upload landed")
	}
}

// Free space is checked at creation: 507.
func TestTUSNoSpace(t *testing.T) {
	c := newTUS(t, diskstore.Options{FreeSpace: func(string) (int64, error) { return 100, nil }})
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "1000"), 507)
}

// stalledPATCH sends a PATCH at offset 0 of loc declaring size bytes, the
// first sent of them, and then nothing: a client frozen mid-upload, or
// gone without a FIN. It returns the raw connection.
func (c *tusT) stalledPATCH(loc string, size, sent int) net.Conn {
	c.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.url, "http://"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "PATCH %s HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nContent-Type: %s\r\nUpload-Offset: 0\r\nContent-Length: %d\r\n\r\n", loc, octet, size)
	if _, err := conn.Write(bytes.Repeat([]byte("x"), sent)); err != nil {
		c.t.Fatal(err)
	}
	return conn
}

// TestTUSStalledPatchTakenOver: a client's PATCH stalls mid-body (its
// connection frozen, or dead without a FIN) while holding the upload. The
// client comes back on a new connection: its HEAD answers, and its PATCH
// interrupts the stalled one, which keeps what arrived, instead of
// answering 423 Locked for as long as the dead connection lasts (before
// the fix: forever). The upload completes.
func TestTUSStalledPatchTakenOver(t *testing.T) {
	c := newTUS(t, diskstore.Options{})
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	r := c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", "filename "+b64([]byte("stall.bin")))
	c.want(r, 201)
	loc := r.Header.Get("Location")
	c.stalledPATCH(loc, len(data), 300<<10)
	// The stalled PATCH must hold the upload before the client comes
	// back: else the new PATCH may get it first and be the one taken over
	// (408) when the stalled one arrives. Holding it, it fills a block
	// from the buffer budget (or writes, once the budget is spent).
	testwait.For(t, "the stalled PATCH to hold the upload", func() bool {
		return c.s.Stats.BufferBytes.Load() > 0 || c.s.Stats.BytesReceived.Load() > 0
	})
	// What the server holds of the stalled body is not durable yet, so
	// the client's HEAD may say 0; it resumes from what HEAD says when its
	// PATCH gets the upload, so it asks again on a conflict, as tus
	// clients do.
	var off int
	var got *http.Response
	for range 5 {
		got = c.do("PATCH", loc, data[off:], "Content-Type", octet, "Upload-Offset", strconv.Itoa(off))
		if got.StatusCode != http.StatusConflict {
			break
		}
		off, _ = strconv.Atoi(c.do("HEAD", loc, nil).Header.Get("Upload-Offset"))
	}
	c.want(got, 204)
	if st := c.s.Stats.TakenOver.Load(); st != 1 {
		t.Fatalf("takeovers: %d, want 1", st)
	}
	b, err := os.ReadFile(filepath.Join(c.dir, "stall.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), data...)
	copy(want, bytes.Repeat([]byte("x"), off)) // the stalled body's bytes, kept
	if !bytes.Equal(b, want) {
		t.Fatalf("the upload holds %d bytes, not the stalled body's %d then the rest", len(b), off)
	}
	t.Logf("the stalled PATCH kept %d bytes; the new one sent the rest", off)
}

// TestTUSIdlePatchReleased: a PATCH whose body sends nothing for the
// idle timeout ends (408) and frees its upload, keeping what arrived, so
// a client that comes back later (no takeover needed) resumes.
func TestTUSIdlePatchReleased(t *testing.T) {
	c := newTUS(t, diskstore.Options{IdleTimeout: 50 * time.Millisecond})
	r := c.do("POST", "/files/", nil, "Upload-Length", "1000000")
	c.want(r, 201)
	loc := r.Header.Get("Location")
	conn := c.stalledPATCH(loc, 1000000, 200000)
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // without the idle timeout: fail, not hang
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the stalled PATCH got no answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || resp.Header.Get("Upload-Offset") != "200000" {
		t.Fatalf("stalled PATCH: %d, offset %q; want 408 at 200000", resp.StatusCode, resp.Header.Get("Upload-Offset"))
	}
	if n := c.s.Stats.IdleTimeouts.Load(); n != 1 {
		t.Fatalf("idle timeouts: %d, want 1", n)
	}
	c.want(c.do("PATCH", loc, make([]byte, 800000), "Content-Type", octet, "Upload-Offset", "200000"), 204)
	if n := c.s.Stats.TakenOver.Load(); n != 0 {
		t.Fatalf("takeovers: %d, want none (the upload was free)", n)
	}
}

// TestTUSFinishedUpload: a finished upload stays known until it expires,
// also across a restart, as tusd keeps it: HEAD answers 200 with
// Upload-Offset = Upload-Length, so that tus-js-client and tuspy, which
// check a stored upload URL with HEAD, do not send the file again (issue
// 23: HEAD answered 404 and they uploaded it whole once more). PATCH to it
// answers as to any upload (204 at its length with nothing, 409 at
// another offset, 413 with bytes); DELETE forgets it, the file stays.
func TestTUSFinishedUpload(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := diskstore.Options{Expire: time.Hour, Now: func() time.Time { return now }}
	s := openT(t, dir, o)
	var handler atomic.Pointer[http.Handler] // the store's, replaced at the restart
	h := tus.Handler(s, "/files/")
	handler.Store(&h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	c := &tusT{t: t, url: srv.URL, dir: dir, s: s}

	data := []byte("finished, and known")
	meta := "filename " + b64([]byte("done.txt")) + ",type " + b64([]byte("text/plain"))
	r := c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", meta)
	c.want(r, 201)
	loc := r.Header.Get("Location")
	c.want(c.do("PATCH", loc, data, "Content-Type", octet, "Upload-Offset", "0"), 204)
	sum := sha256.Sum256(data)
	size := strconv.Itoa(len(data))
	head := func(when string) {
		t.Helper()
		r := c.do("HEAD", loc, nil)
		c.want(r, 200)
		for k, v := range map[string]string{"Upload-Offset": size, "Upload-Length": size, "Upload-Metadata": meta,
			"Cache-Control": "no-store", "Tus-Resumable": "1.0.0", "Sluice-Sha256": hex.EncodeToString(sum[:]),
			"Upload-Expires": now.Add(time.Hour).Format(http.TimeFormat)} {
			if got := r.Header.Get(k); got != v {
				t.Errorf("%s: HEAD %s: %q, want %q", when, k, got, v)
			}
		}
	}
	head("finished")
	r = c.do("PATCH", loc, nil, "Content-Type", octet, "Upload-Offset", size)
	c.want(r, 204)
	if r.Header.Get("Upload-Offset") != size {
		t.Errorf("PATCH at the length: Upload-Offset %q, want %s", r.Header.Get("Upload-Offset"), size)
	}
	c.want(c.do("PATCH", loc, data[:3], "Content-Type", octet, "Upload-Offset", "0"), 409)
	c.want(c.do("PATCH", loc, nil, "Content-Type", octet, "Upload-Offset", "3"), 409)
	c.want(c.do("PATCH", loc, []byte("more"), "Content-Type", octet, "Upload-Offset", size), 413)
	c.want(c.do("PATCH", loc, nil, "Content-Type", "text/plain", "Upload-Offset", size), 415)
	if got, _ := os.ReadFile(filepath.Join(dir, "done.txt")); !bytes.Equal(got, data) {
		t.Fatalf("landed %q", got)
	}

	// A restart keeps it.
	s.Close()
	s = openT(t, dir, o)
	h = tus.Handler(s, "/files/")
	c.s = s
	handler.Store(&h)
	head("after a restart")

	// A second one, terminated: 204, then gone; its file stays.
	r = c.do("POST", "/files/", nil, "Upload-Length", "2", "Upload-Metadata", "filename "+b64([]byte("two")))
	loc2 := r.Header.Get("Location")
	c.want(c.do("PATCH", loc2, []byte("ok"), "Content-Type", octet, "Upload-Offset", "0"), 204)
	c.want(c.do("HEAD", loc2, nil), 200)
	c.want(c.do("DELETE", loc2, nil), 204)
	c.want(c.do("HEAD", loc2, nil), 404)
	c.want(c.do("PATCH", loc2, nil, "Content-Type", octet, "Upload-Offset", "2"), 404)
	c.want(c.do("DELETE", loc2, nil), 404)
	if _, err := os.Stat(filepath.Join(dir, "two")); err != nil {
		t.Fatalf("terminating a finished upload removed its file: %v", err)
	}

	// Expiry removes it, and its file in .partial; not before.
	if n := s.Expire(now.Add(30 * time.Minute)); n != 0 {
		t.Fatalf("expired %d too early", n)
	}
	head("before it expires")
	if n := s.Expire(now.Add(2 * time.Hour)); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	c.want(c.do("HEAD", loc, nil), 404)
	if p := partialFiles(t, dir); len(p) != 0 {
		t.Fatalf("left in .partial after expiry: %v", p)
	}
	s.Close()
	s = openT(t, dir, o)
	if _, err := s.StatID(strings.TrimPrefix(loc, "/files/")); err == nil {
		t.Fatal("an expired finished upload came back after a restart")
	}
}

// TestTUSHeadLandsAFullUpload: HEAD of an upload whose bytes all arrived
// but which did not land (its name was taken by a directory when the
// last PATCH finished it) lands it, or answers why not: Upload-Offset =
// Upload-Length would tell any tus client the upload is done. Before,
// HEAD answered 200 at the length and the file never landed.
func TestTUSHeadLandsAFullUpload(t *testing.T) {
	c := newTUS(t, diskstore.Options{})
	data := []byte("all bytes here, nowhere to land")
	meta := "filename " + b64([]byte("blocked"))
	r := c.do("POST", "/files/", nil, "Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", meta)
	c.want(r, 201)
	loc := r.Header.Get("Location")
	if err := os.Mkdir(filepath.Join(c.dir, "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := c.do("PATCH", loc, data, "Content-Type", octet, "Upload-Offset", "0"); r.StatusCode < 400 {
		t.Fatalf("PATCH completing an upload that cannot land: %d, want an error", r.StatusCode)
	}
	if r := c.do("HEAD", loc, nil); r.StatusCode < 400 {
		t.Fatalf("HEAD while the name is still taken: %d (Upload-Offset %s), want an error", r.StatusCode, r.Header.Get("Upload-Offset"))
	}
	if err := os.Remove(filepath.Join(c.dir, "blocked")); err != nil {
		t.Fatal(err)
	}
	r = c.do("HEAD", loc, nil)
	c.want(r, 200)
	sum := sha256.Sum256(data)
	if r.Header.Get("Upload-Offset") != strconv.Itoa(len(data)) || r.Header.Get("Sluice-Sha256") != hex.EncodeToString(sum[:]) {
		t.Fatalf("HEAD once the name is free: offset %q, hash %q", r.Header.Get("Upload-Offset"), r.Header.Get("Sluice-Sha256"))
	}
	if got, err := os.ReadFile(filepath.Join(c.dir, "blocked")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file did not land: %q, %v", got, err)
	}
}

// TestTUSStrictHeaders: Upload-Offset and Upload-Length take digits only,
// and an Upload-Metadata key given twice is refused, as tus 1.0.0 says
// (found by hand, 2026-11-29: "+5" was taken for 5, and the last of two
// filename keys won).
func TestTUSStrictHeaders(t *testing.T) {
	c := newTUS(t, diskstore.Options{})
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "+3", "Upload-Metadata", "filename "+b64([]byte("a"))), 400)
	c.want(c.do("POST", "/files/", nil, "Upload-Length", "3", "Upload-Metadata", "filename "+b64([]byte("a"))+",filename "+b64([]byte("b"))), 400)
	r := c.do("POST", "/files/", nil, "Upload-Length", "3", "Upload-Metadata", "filename "+b64([]byte("a")))
	c.want(r, 201)
	loc := r.Header.Get("Location")
	c.want(c.do("PATCH", loc, []byte("abc"), "Content-Type", octet, "Upload-Offset", "+0"), 400)
	c.want(c.do("PATCH", loc, []byte("abc"), "Content-Type", octet, "Upload-Offset", "0"), 204)
}
