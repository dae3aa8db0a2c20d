package tus_test

// Interoperability of the tus server with the real clients users have:
// tuspy 1.1.0 (PyPI) and tus-js-client 4.3.1 (npm, under Node), installed
// pinned by interop/tus/setup.sh into ~/.cache/sluice/tus. Each test
// uploads a file in two runs: the first stops part-way (tuspy's stop_at,
// tus-js-client's abort), the second resumes from the server's offset.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
	"github.com/sluicehq/sluice/internal/testkit/xfertest"
	"github.com/sluicehq/sluice/internal/xfer"
	"github.com/sluicehq/sluice/internal/xfer/diskstore"
	"github.com/sluicehq/sluice/internal/xfer/tus"
)

func tusDir(t *testing.T, sub string) string {
	t.Helper()
	dir := os.Getenv("SLUICE_TUS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "sluice", "tus")
	}
	p := filepath.Join(dir, sub)
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("tus clients not installed (%v): run interop/tus/setup.sh or set SLUICE_TUS_DIR", err)
		testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, msg)
	}
	return filepath.Join(dir, filepath.Dir(sub))
}

func runPeer(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// field returns the value of the last "key value" line of out.
func field(out, key string) string {
	v := ""
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, key+" "); ok {
			v = strings.TrimSpace(rest)
		}
	}
	return v
}

func interopEnv(t *testing.T) (*env, string, []byte, string) {
	e := startEnv(t, diskstore.Options{})
	data := xfertest.RandBytes(3<<20+17, 30)
	return e, "http://" + e.Srv.Addrs.TUS + "/files/", data, xfertest.TempFile(t, data)
}

func TestInteropTuspy(t *testing.T) {
	venv := tusDir(t, "venv/bin/python")
	py := filepath.Join(venv, "python")
	script, _ := filepath.Abs("../../../interop/tus/tuspy_upload.py")
	e, url, data, src := interopEnv(t)
	store := filepath.Join(t.TempDir(), "urls.json")

	out := runPeer(t, exec.Command(py, script, url, src, "py.bin", store, "--stop-at", fmt.Sprint(1<<20)))
	if got := field(out, "offset"); got != fmt.Sprint(1<<20) {
		t.Fatalf("first run stopped at %q:\n%s", got, out)
	}
	in, err := e.Store.Stat("py.bin")
	if err != nil || in.Offset != 1<<20 {
		t.Fatalf("server after the interruption: %+v %v", in, err)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "py.bin")); !os.IsNotExist(err) {
		t.Fatal("the file landed before it was complete")
	}
	out = runPeer(t, exec.Command(py, script, url, src, "py.bin", store))
	if got := field(out, "start"); got != fmt.Sprint(1<<20) {
		t.Fatalf("second run started at %q, want the server's offset:\n%s", got, out)
	}
	xfertest.CheckLanded(t, e.Dir, "py.bin", data, sha256Of(data))
	if n := e.Store.Stats.ChunksRejected.Load(); n != 0 {
		t.Fatalf("%d of tuspy's sha1-checksummed PATCHes refused", n)
	}
}

func TestInteropTusJS(t *testing.T) {
	nodeDir := tusDir(t, "node/node_modules/tus-js-client/package.json")
	nodeDir = filepath.Dir(filepath.Dir(nodeDir)) // .../node
	if _, err := exec.LookPath("node"); err != nil {
		testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, "node not found")
	}
	script, _ := filepath.Abs("../../../interop/tus/tusjs_upload.js")
	e, url, data, src := interopEnv(t)
	node := func(args ...string) *exec.Cmd {
		c := exec.Command("node", append([]string{script, url, src, "js.bin"}, args...)...)
		c.Env = append(os.Environ(), "TUS_NODE_DIR="+nodeDir)
		return c
	}
	out := runPeer(t, node("--abort-at", fmt.Sprint(1<<20)))
	upURL := field(out, "url")
	in, err := e.Store.Stat("js.bin")
	if upURL == "" || err != nil || in.Offset < 1<<20 || in.Offset >= int64(len(data)) {
		t.Fatalf("after the abort: url %q, server %+v %v\n%s", upURL, in, err, out)
	}
	out = runPeer(t, node("--resume", upURL))
	if field(out, "url") != upURL {
		t.Fatalf("the second run did not continue %s (it must not start again):\n%s", upURL, out)
	}
	xfertest.CheckLanded(t, e.Dir, "js.bin", data, sha256Of(data))
	if got := e.Store.Stats.BytesReceived.Load(); got != int64(len(data)) {
		t.Fatalf("server received %d bytes for a %d-byte file: the resume re-sent data", got, len(data))
	}
}

// gate holds the n-th PATCH until released, telling the test it arrived:
// the moment to SIGKILL the client in the middle of an upload.
type gate struct {
	h       http.Handler
	n       atomic.Int32
	arrived chan struct{}
	release chan struct{}
	served  chan struct{} // the held PATCH was answered
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPatch && g.n.Add(-1) == 0 {
		close(g.arrived)
		<-g.release
		defer close(g.served)
	}
	g.h.ServeHTTP(w, r)
}

// startGated serves the tus handler behind a gate at the n-th PATCH.
func startGated(t *testing.T, n int32) (*env, string, *gate) {
	e := &env{Dir: t.TempDir()}
	e.Store = openT(t, e.Dir, diskstore.Options{})
	g := &gate{h: tus.Handler(e.Store, "/files/"), arrived: make(chan struct{}), release: make(chan struct{}), served: make(chan struct{})}
	g.n.Store(n)
	mux := http.NewServeMux()
	mux.Handle("/files/", g)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	return e, srv.URL + "/files/", g
}

// killDuringPatch starts cmd, waits until its n-th PATCH is being served,
// SIGKILLs it, then lets the server see the broken request.
func killDuringPatch(t *testing.T, cmd *exec.Cmd, g *gate) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-g.arrived:
	case err := <-exited:
		t.Fatalf("client exited before its PATCH was held: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatal("timed out waiting for the client's PATCH")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	close(g.release)
	select {
	case <-g.served:
	case <-time.After(30 * time.Second):
		t.Fatal("the held PATCH was never answered")
	}
}

// The clients killed with SIGKILL while their 4th PATCH (of 256 KiB) is
// held by the server: the next run resumes from the server's offset. The
// killed PATCH is kept only if its whole body had reached the server's
// socket (tuspy's carries a sha1 checksum, so a part is never kept;
// tus-js-client's has none, so what arrived of it is kept).
func TestInteropTusKilled(t *testing.T) {
	data := xfertest.RandBytes(2<<20+5, 31)
	src := xfertest.TempFile(t, data)
	t.Run("tuspy", func(t *testing.T) {
		py := filepath.Join(tusDir(t, "venv/bin/python"), "python")
		script, _ := filepath.Abs("../../../interop/tus/tuspy_upload.py")
		e, url, g := startGated(t, 4)
		store := filepath.Join(t.TempDir(), "urls.json")
		killDuringPatch(t, exec.Command(py, script, url, src, "k.bin", store), g)
		in, err := e.Store.Stat("k.bin")
		if err != nil || (in.Offset != 3*256<<10 && in.Offset != 4*256<<10) {
			t.Fatalf("after the kill: %+v %v", in, err)
		}
		out := runPeer(t, exec.Command(py, script, url, src, "k.bin", store))
		if got := field(out, "start"); got != fmt.Sprint(in.Offset) {
			t.Fatalf("resumed at %q:\n%s", got, out)
		}
		xfertest.CheckLanded(t, e.Dir, "k.bin", data, sha256Of(data))
	})
	t.Run("tus-js-client", func(t *testing.T) {
		nodeDir := filepath.Dir(filepath.Dir(tusDir(t, "node/node_modules/tus-js-client/package.json")))
		script, _ := filepath.Abs("../../../interop/tus/tusjs_upload.js")
		e, url, g := startGated(t, 4)
		node := func(args ...string) *exec.Cmd {
			c := exec.Command("node", append([]string{script, url, src, "k.bin"}, args...)...)
			c.Env = append(os.Environ(), "TUS_NODE_DIR="+nodeDir)
			return c
		}
		killDuringPatch(t, node(), g)
		in, err := e.Store.Stat("k.bin")
		if err != nil || in.Offset < 3*256<<10 {
			t.Fatalf("after the kill: %+v %v", in, err)
		}
		// tus-js-client keeps no URL in Node by default: the user passes it.
		out := runPeer(t, node("--resume", url+in.ID))
		if field(out, "url") != url+in.ID {
			t.Fatalf("did not continue the upload:\n%s", out)
		}
		xfertest.CheckLanded(t, e.Dir, "k.bin", data, sha256Of(data))
		if got := e.Store.Stats.BytesReceived.Load(); got != int64(len(data)) {
			t.Fatalf("server received %d bytes for %d: the resume re-sent data", got, len(data))
		}
	})
}

// TestInteropTusFrozen: tus-js-client is stopped (SIGSTOP) in the middle
// of a PATCH body larger than the connection can buffer, so its connection stays open and carries
// nothing, as a frozen process or a dead link without a FIN. A new
// tus-js-client resumes the upload by its URL: its PATCH takes the upload
// over from the stalled one, which keeps what arrived, and the upload
// lands whole. Before takeover the new client got 423 Locked until its
// retries ran out.
func TestInteropTusFrozen(t *testing.T) {
	nodeDir := filepath.Dir(filepath.Dir(tusDir(t, "node/node_modules/tus-js-client/package.json")))
	script, _ := filepath.Abs("../../../interop/tus/tusjs_upload.js")
	// The PATCH body must be more than the loopback connection can
	// buffer (the sender's and the receiver's socket buffers at their
	// largest), so that the client is blocked writing it when stopped.
	chunk := 16<<20 + sysctlMax(t, "tcp_wmem") + sysctlMax(t, "tcp_rmem")
	data := xfertest.RandBytes(chunk+8<<20, 33)
	src := xfertest.TempFile(t, data)
	e, url, g := startGated(t, 1)
	node := func(args ...string) *exec.Cmd {
		c := exec.Command("node", append([]string{script, url, src, "f.bin", "--chunk", strconv.Itoa(chunk)}, args...)...)
		c.Env = append(os.Environ(), "TUS_NODE_DIR="+nodeDir)
		return c
	}
	frozen := node()
	var err error
	var out bytes.Buffer
	frozen.Stdout, frozen.Stderr = &out, &out
	if err := frozen.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		frozen.Process.Signal(syscall.SIGKILL)
		frozen.Wait()
	})
	select {
	case <-g.arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for the client's PATCH\n%s", out.String())
	}
	// The client is blocked writing the body (see chunk) when stopped.
	frozen.Process.Signal(syscall.SIGSTOP)
	close(g.release)
	var in xfer.Info
	for deadline := time.Now().Add(30 * time.Second); !in.Active; time.Sleep(5 * time.Millisecond) {
		if in, err = e.Store.Stat("f.bin"); err != nil || time.Now().After(deadline) {
			t.Fatalf("the frozen client's PATCH never took its upload: %+v %v", in, err)
		}
	}
	res := runPeer(t, node("--resume", url+in.ID))
	if field(res, "url") != url+in.ID {
		t.Fatalf("did not continue the upload:\n%s", res)
	}
	xfertest.CheckLanded(t, e.Dir, "f.bin", data, sha256Of(data))
	if n := e.Store.Stats.TakenOver.Load(); n == 0 {
		t.Fatal("no takeover counted")
	}
	t.Logf("takeovers %d; the resumed client:\n%s", e.Store.Stats.TakenOver.Load(), res)
}

// sysctlMax is the largest size of net.ipv4.NAME (tcp_wmem, tcp_rmem: the
// third of "min default max").
func sysctlMax(t *testing.T, name string) int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatalf("%s: %q", name, b)
	}
	return n
}

// countingTUS serves the tus handler and counts the requests by method.
type countingTUS struct {
	h      http.Handler
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingTUS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.counts[r.Method]++
	c.mu.Unlock()
	c.h.ServeHTTP(w, r)
}

func (c *countingTUS) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[method]
}

// TestInteropTusFinishedNotResent: each client uploads a file with its
// URL storage on, then "uploads" the same file again: it finds the stored
// URL, HEADs it, sees the upload complete (Upload-Offset = Upload-Length)
// and sends nothing: no new upload, no PATCH, no byte. Before issue 23 the
// server answered 404 for a finished upload: tus-js-client then created a
// new upload and sent the file again whole, and tuspy 1.1.0 failed
// ("Attempt to retrieve offset fails with status 404").
func TestInteropTusFinishedNotResent(t *testing.T) {
	data := xfertest.RandBytes(1<<20+9, 34)
	src := xfertest.TempFile(t, data)
	start := func(t *testing.T) (*env, string, *countingTUS) {
		e := &env{Dir: t.TempDir()}
		e.Store = openT(t, e.Dir, diskstore.Options{Expire: time.Hour})
		c := &countingTUS{h: tus.Handler(e.Store, "/files/"), counts: map[string]int{}}
		mux := http.NewServeMux()
		mux.Handle("/files/", c)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return e, srv.URL + "/files/", c
	}
	again := func(t *testing.T, e *env, c *countingTUS, out string) {
		t.Helper()
		if got := e.Store.Stats.BytesReceived.Load(); got != int64(len(data)) {
			t.Errorf("server received %d bytes for a %d-byte file uploaded once:\n%s", got, len(data), out)
		}
		if n := c.count("POST"); n != 1 {
			t.Errorf("%d uploads created, want 1:\n%s", n, out)
		}
		if n := e.Store.Stats.UploadsCompleted.Load(); n != 1 {
			t.Errorf("%d uploads completed, want 1", n)
		}
		if c.count("HEAD") == 0 {
			t.Errorf("the second run did not HEAD the stored URL:\n%s", out)
		}
	}
	t.Run("tuspy", func(t *testing.T) {
		py := filepath.Join(tusDir(t, "venv/bin/python"), "python")
		script, _ := filepath.Abs("../../../interop/tus/tuspy_upload.py")
		e, url, c := start(t)
		store := filepath.Join(t.TempDir(), "urls.json")
		runPeer(t, exec.Command(py, script, url, src, "done.bin", store))
		xfertest.CheckLanded(t, e.Dir, "done.bin", data, sha256Of(data))
		patches := c.count("PATCH")
		out := runPeer(t, exec.Command(py, script, url, src, "done.bin", store))
		if got := field(out, "start"); got != fmt.Sprint(len(data)) {
			t.Errorf("second run started at %q, want %d (complete):\n%s", got, len(data), out)
		}
		if n := c.count("PATCH"); n != patches {
			t.Errorf("second run sent %d PATCHes", n-patches)
		}
		again(t, e, c, out)
	})
	t.Run("tus-js-client", func(t *testing.T) {
		nodeDir := filepath.Dir(filepath.Dir(tusDir(t, "node/node_modules/tus-js-client/package.json")))
		if _, err := exec.LookPath("node"); err != nil {
			testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, "node not found")
		}
		script, _ := filepath.Abs("../../../interop/tus/tusjs_upload.js")
		e, url, c := start(t)
		store := filepath.Join(t.TempDir(), "urls.json")
		node := func() *exec.Cmd {
			cmd := exec.Command("node", script, url, src, "done.bin", "--store", store)
			cmd.Env = append(os.Environ(), "TUS_NODE_DIR="+nodeDir)
			return cmd
		}
		out := runPeer(t, node())
		first := field(out, "url")
		xfertest.CheckLanded(t, e.Dir, "done.bin", data, sha256Of(data))
		patches := c.count("PATCH")
		out = runPeer(t, node())
		if field(out, "previous") != first || field(out, "url") != first {
			t.Errorf("second run did not resume the stored %s:\n%s", first, out)
		}
		if n := c.count("PATCH"); n != patches {
			t.Errorf("second run sent %d PATCHes", n-patches)
		}
		again(t, e, c, out)
	})
}

// TestInteropTusJSParallel: tus-js-client's parallelUploads sends the
// file as three partial uploads at once and joins them with a final
// upload (the concatenation extension), through the S3 store: the file
// lands whole, and the final upload names its three partials. Each is
// over 5 MiB, so they become its parts by copies inside the store: the
// server received every byte once.
func TestInteropTusJSParallel(t *testing.T) {
	nodeDir := tusDir(t, "node/node_modules/tus-js-client/package.json")
	nodeDir = filepath.Dir(filepath.Dir(nodeDir)) // .../node
	if _, err := exec.LookPath("node"); err != nil {
		testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, "node not found")
	}
	script, _ := filepath.Abs("../../../interop/tus/tusjs_upload.js")
	e := startS3(t)
	data := xfertest.RandBytes(16<<20+17, 43)
	src := xfertest.TempFile(t, data)
	c := exec.Command("node", script, e.url, src, "parallel.bin", "--parallel", "3", "--chunk", fmt.Sprint(1<<20))
	c.Env = append(os.Environ(), "TUS_NODE_DIR="+nodeDir)
	out := runPeer(t, c)
	got, err := e.object("parallel.bin")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file tus-js-client sent in parallel: %d bytes (want %d), %v\n%s", len(got), len(data), err, out)
	}
	r := do(t, "HEAD", field(out, "url"), nil)
	concat := r.Header.Get("Upload-Concat")
	if r.StatusCode != http.StatusOK || !strings.HasPrefix(concat, "final;") || len(strings.Fields(concat)) != 3 {
		t.Fatalf("HEAD of %s: %s, Upload-Concat %q: want a final upload of 3 partials\n%s", field(out, "url"), r.Status, concat, out)
	}
	if n := e.store.Stats.UploadsCompleted.Load(); n != 4 {
		t.Fatalf("%d uploads completed, want 4 (3 partial, 1 final)", n)
	}
	if n := e.store.Stats.BytesReceived.Load(); n != int64(len(data)) {
		t.Fatalf("the server wrote %d bytes for a %d-byte file: the partials were not copied inside the store", n, len(data))
	}
}
