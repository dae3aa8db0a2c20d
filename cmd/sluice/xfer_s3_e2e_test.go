package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluicehq/sluice/internal/testkit/faultproxy"
	"github.com/sluicehq/sluice/internal/testkit/s3test"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
	"github.com/sluicehq/sluice/internal/xfer/s3store"
)

// startS3Server is `sluice xfer serve --store URL --grpc ADDR`.
func startS3Server(t *testing.T, name, url string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, name, "xfer", "serve", "--store", url, "--grpc", addr)
	testwait.For(t, name+" listening", func() bool { return strings.Contains(p.log.String(), "listening grpc") })
	return p, addr
}

// The server SIGKILLed mid-upload, and the upload resumed through
// another `xfer serve` on the same S3 store (the client's connection
// moved to it, as a load balancer would): the second server finds the
// upload in the store (the parts S3 lists, the hash state beside them),
// takes it once the first one's lease ends, and the file lands whole.
func TestXferS3ResumeOnAnotherServer(t *testing.T) {
	st := s3test.Start(t)
	url := st.URL("e2e-kill-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", ""))
	loc, c := s3Client(t, url)
	probe, err := s3store.Open(loc, c, s3store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, aAddr := startS3Server(t, "xfer serve A", url)
	p := faultproxy.New(t, aAddr)
	src, sum := xferSource(t, 24<<20)
	cmd, out, errb := sendCmd(t, t.TempDir(), src, "--to", "grpc://"+p.Addr(), "--name", "k.bin", "--chunk", "256KiB", "--rate", "8MiB", "--log-level", "info")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	testwait.For(t, "a part of the upload in the store", func() bool {
		in, err := probe.Stat("k.bin")
		return err == nil && in.Offset >= 8<<20
	})
	a.kill()
	if _, err := getObject(c, loc, "k.bin"); err == nil {
		t.Fatal("k.bin is visible before the upload completed")
	}
	b, bAddr := startS3Server(t, "xfer serve B", url)
	p.SetUpstream(bAddr)
	p.CutAll()
	waitSend(t, cmd, errb, 120*time.Second, "through the second server")
	if got := lastLine(out.String()); got != sum {
		t.Fatalf("send printed %q, want the SHA-256 %s", got, sum)
	}
	want, _ := os.ReadFile(src)
	got, err := getObject(c, loc, "k.bin")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("object k.bin: %d bytes, %v; want the source", len(got), err)
	}
	if !strings.Contains(b.log.String(), `msg="file landed" name=k.bin`) {
		t.Fatalf("server B did not land the file:\n%s", b.log.String())
	}
	m := resumeRE.FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("the send did not resume from the store's offset:\n%s", errb)
	}
	if off, _ := strconv.Atoi(m[1]); off < 8<<20 {
		t.Fatalf("resumed at %d, want at least the 8 MiB part the store had before the kill", off)
	}
}

// Credentials the object store refuses: `xfer serve --store` exits at
// once naming the permission problem, before it listens; --dir with
// --store, or a --store URL without an endpoint, is a usage error.
func TestXferServeS3Refusals(t *testing.T) {
	st := s3test.Start(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	code, _, stderr := run("xfer", "serve", "--store", st.URL("denied"), "--grpc", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "permission denied") {
		t.Fatalf("wrong secret: exit %d, stderr %q; want 1 and permission denied", code, stderr)
	}
	code, _, stderr = run("xfer", "serve", "--store", st.URL("x"), "--dir", t.TempDir(), "--grpc", "127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, "not both") {
		t.Fatalf("--dir and --store: exit %d, %q", code, stderr)
	}
	code, _, stderr = run("xfer", "serve", "--store", "s3://bucket/p", "--grpc", "127.0.0.1:0")
	if code != 2 || !strings.Contains(stderr, "endpoint=") {
		t.Fatalf("no endpoint: exit %d, %q", code, stderr)
	}
}

func getObject(c *s3.Client, loc s3store.Location, name string) ([]byte, error) {
	key := loc.Prefix + name
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &loc.Bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// bench upload --store measures one thing; the sweep's flags beside it
// would be ignored silently, so they are refused.
func TestBenchUploadStoreRefusesSweepFlags(t *testing.T) {
	code, _, stderr := run("bench", "upload", "--store", "s3://b?endpoint=http://127.0.0.1:1", "--chunks", "1MiB", "--svg", "x.svg")
	if code != 2 || !strings.Contains(stderr, "--chunks, --svg") {
		t.Fatalf("exit %d, stderr %q; want 2 naming --chunks, --svg", code, stderr)
	}
	code, _, stderr = run("bench", "upload", "--store", "s3://b", "--size", "1MiB")
	if code != 2 || !strings.Contains(stderr, "endpoint=") {
		t.Fatalf("no endpoint: exit %d, stderr %q", code, stderr)
	}
}

// bench upload --store --json writes the envelope every bench command
// writes (bench.Report): its command line, and each row's reps and
// summary, the sluice rows with their ratio to the direct upload of the
// same rep and the servers' memory. It had no --json.
func TestBenchUploadStoreJSON(t *testing.T) {
	st := s3test.Start(t)
	js := filepath.Join(t.TempDir(), "s3.json")
	args := []string{"--store", st.URL("bench-json-" + strconv.Itoa(os.Getpid())), "--size", "6MiB", "--json", js}
	out, err := exec.Command(sluiceBin, append([]string{"bench", "upload"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	rep := readReport(t, js)
	if rep.Command != "bench upload" || !slices.Equal(rep.Args, args) || rep.Reps != 1 || len(rep.Rows) != 3 {
		t.Fatalf("report %+v", rep)
	}
	for i, r := range rep.Rows {
		if len(r.Reps) != 1 || r.Summary["mb_per_sec"].N != 1 || r.Summary["x_direct"].Median <= 0 {
			t.Errorf("row %s: reps %+v, summary %+v", r.Name, r.Reps, r.Summary)
		}
		if i > 0 && r.Summary["peak_rss_bytes"].Median <= 0 {
			t.Errorf("row %s: no servers' memory: %+v", r.Name, r.Summary)
		}
	}
	if !strings.Contains(string(out), "| × direct |") {
		t.Errorf("no table:\n%s", out)
	}
}

// `xfer serve --store … --tus` offers tus concatenation, and its partial
// uploads are the store's, not a server's: two partials sent to two
// servers of one store, joined by a final upload on a third request to
// the first, land as one file.
func TestXferServeS3ConcatAcrossServers(t *testing.T) {
	st := s3test.Start(t)
	url := st.URL("e2e-concat-" + strconv.Itoa(os.Getpid()))
	var bases []string
	for _, name := range []string{"xfer serve A", "xfer serve B"} {
		addr := freeAddr(t)
		p := start(t, name, "xfer", "serve", "--store", url, "--tus", addr)
		testwait.For(t, name+" listening", func() bool { return strings.Contains(p.log.String(), "listening tus") })
		bases = append(bases, "http://"+addr)
	}
	tusReq := func(method, u string, body []byte, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, u, bytes.NewReader(body))
		req.Header.Set("Tus-Resumable", "1.0.0")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := tusReq("OPTIONS", bases[0]+"/files/", nil); !strings.Contains(r.Header.Get("Tus-Extension"), "concatenation") {
		t.Fatalf("Tus-Extension %q: no concatenation over --store", r.Header.Get("Tus-Extension"))
	}
	data := make([]byte, 7<<20+5)
	for i := range data {
		data[i] = byte(i * 7)
	}
	pieces := [][]byte{data[:5<<20+1], data[5<<20+1:]}
	var urls []string
	for i, piece := range pieces {
		r := tusReq("POST", bases[i]+"/files/", nil, "Upload-Concat", "partial", "Upload-Length", strconv.Itoa(len(piece)))
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("partial on server %d: %s", i, r.Status)
		}
		u := bases[i] + r.Header.Get("Location")
		if r := tusReq("PATCH", u, piece, "Content-Type", "application/offset+octet-stream", "Upload-Offset", "0"); r.StatusCode != http.StatusNoContent {
			t.Fatalf("PATCH of partial %d: %s", i, r.Status)
		}
		urls = append(urls, u)
	}
	meta := "filename " + base64.StdEncoding.EncodeToString([]byte("joined.bin"))
	if r := tusReq("POST", bases[0]+"/files/", nil, "Upload-Concat", "final;"+strings.Join(urls, " "), "Upload-Metadata", meta); r.StatusCode != http.StatusCreated {
		t.Fatalf("final upload: %s", r.Status)
	}
	loc, c := s3Client(t, url)
	got, err := getObject(c, loc, "joined.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("joined.bin: %d bytes (want %d), %v", len(got), len(data), err)
	}
}

// s3Client is the location of an --store URL and a client of it, for a
// test to look at the bucket itself.
func s3Client(t *testing.T, url string) (s3store.Location, *s3.Client) {
	t.Helper()
	loc, err := s3store.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s3store.Client(loc)
	if err != nil {
		t.Fatal(err)
	}
	return loc, c
}
