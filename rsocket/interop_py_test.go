package rsocket_test

// Interoperability with rsocket-py 0.4.20 (PyPI `rsocket`), the Python
// RSocket peer, over TCP in both directions. The Python side lives in
// interop/rsocket-py (setup.sh installs it into a venv). Results are the
// rsocket-py rows of the table in docs/rsocket-interop.md (see
// interopdoc_test.go): rewritten with SLUICE_INTEROP_UPDATE=1, checked
// otherwise.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/peers"
	"github.com/sluicehq/sluice/rsocket"
	"github.com/sluicehq/sluice/rsocket/echo"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

const largePayload = 20 << 20

// pyResult is one JSON line of interop/rsocket-py/client.py.
type pyResult struct {
	Case   string `json:"case"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// pyRows are the rsocket-py rows of the interop table.
var pyRows = &interopRows{peer: "rsocket-py"}

func record(dir, model, result, evidence string) { pyRows.add(dir, "tcp", model, result, evidence) }

// rsocketPy returns the venv's python, or skips (fails with
// SLUICE_INTEROP=require) when it is missing.
func rsocketPy(t *testing.T) string {
	t.Helper()
	py := os.Getenv("SLUICE_RSOCKET_PY")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "sluice", "rsocket-py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		msg := fmt.Sprintf("rsocket-py not installed (%v): run interop/rsocket-py/setup.sh or set SLUICE_RSOCKET_PY", err)
		testskip.Missing(t, "SLUICE_INTEROP", testskip.Interop, msg)
	}
	return py
}

// pyObserved is what only our serving side can see (fire-and-forget,
// metadata push, a cancelled stream), reported by the hooks of the echo
// responder that `sluice rsocket serve` uses (package rsocket/echo).
type pyObserved struct {
	fnf, push, cancelled chan string
}

func (o *pyObserved) responder() *echo.Responder {
	offer := func(ch chan string, s string) {
		select {
		case ch <- s:
		default:
		}
	}
	return &echo.Responder{Hooks: echo.Hooks{
		FireAndForget: func(p rsocket.Payload) { offer(o.fnf, string(p.Data)) },
		MetadataPush:  func(md []byte) { offer(o.push, string(md)) },
		StreamStopped: func(n, sent uint64, err error) {
			offer(o.cancelled, fmt.Sprintf("stream of %d stopped after %d elements: %v", n, sent, err))
		},
	}}
}

// pyDir is the directory of the Python scripts.
func pyDir(t *testing.T) string {
	d, err := filepath.Abs(filepath.Join("..", "interop", "rsocket-py"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Their client → our server.
func TestInteropPyClient(t *testing.T) {
	py := rsocketPy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ln, _, err := rsocket.Listen("tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	obs := &pyObserved{fnf: make(chan string, 1), push: make(chan string, 1), cancelled: make(chan string, 1)}
	mln := &meteredListener{Listener: ln}
	go rsocket.Serve(ctx, mln, obs.responder(), rsocket.WithMaxFrameSize(1<<20))
	host, port, _ := strings.Cut(ln.Addr().String(), ":")

	cmd := exec.CommandContext(ctx, py, filepath.Join(pyDir(t), "client.py"), host, port)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.py: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	got := map[string]pyResult{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r pyResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("client.py printed a line that is not a result: %q", sc.Text())
		}
		got[r.Case] = r
	}
	wait := func(ch chan string, what string) (string, bool) {
		select {
		case v := <-ch:
			return v, true
		case <-time.After(30 * time.Second):
			t.Errorf("%s: the server did not observe it within 30 s", what)
			return "", false
		}
	}
	for _, c := range pyClientCases {
		t.Run(c, func(t *testing.T) {
			r, ok := got[c]
			if !ok {
				t.Fatalf("client.py printed no result for %s; stderr:\n%s", c, stderr.String())
			}
			if !r.OK {
				record(interopClDir, c, "FAIL", r.Detail)
				t.Fatalf("%s: %s", c, r.Detail)
			}
			detail := r.Detail
			switch c {
			case "fire_and_forget":
				v, ok := wait(obs.fnf, c)
				if ok && v != "fnf-from-py" {
					t.Errorf("fire-and-forget data %q", v)
				}
				detail = "server got " + strconv.Quote(v)
			case "metadata_push":
				v, ok := wait(obs.push, c)
				if ok && v != "push-from-py" {
					t.Errorf("metadata push %q", v)
				}
				detail = "server got " + strconv.Quote(v)
			case "cancel":
				v, _ := wait(obs.cancelled, c)
				detail = r.Detail + "; " + v
			case "large_20MiB":
				// All connections of the run are metered: the largest
				// frame either way must be a fragment, not the payload.
				in, outm := mln.summary()
				if in.largest() > 1<<20 || outm.largest() > 1<<20 {
					t.Errorf("a frame over 1 MiB: py sent %v; we sent %v", in, outm)
				}
				detail = fmt.Sprintf("%s; py sent %v; we sent %v", r.Detail, in, outm)
			}
			t.Log(detail)
			if !t.Failed() {
				record(interopClDir, c, "pass", detail)
			}
		})
	}
}

var pyClientCases = []string{"request_response", "fire_and_forget", "metadata_push", "request_stream",
	"request_channel", "error", "cancel", "concurrent_1000", "large_20MiB"}

var pyServerCases = []string{"request_response", "fire_and_forget", "metadata_push", "request_stream",
	"request_channel", "error", "cancel", "concurrent_1000", "large_20MiB"}

// pyEvent is one JSON line of interop/rsocket-py/server.py.
type pyEvent struct {
	Event    string `json:"event"`
	Port     int    `json:"port"`
	Data     string `json:"data"`
	Metadata string `json:"metadata"`
	Sent     int    `json:"sent"`
}

// startPyServer runs server.py and returns its address and its events.
func startPyServer(t *testing.T, ctx context.Context, py string) (string, <-chan pyEvent) {
	t.Helper()
	cmd := exec.CommandContext(ctx, py, filepath.Join(pyDir(t), "server.py"))
	proc := peers.Start(t, cmd, false)
	stdout := proc.Stdout
	events := make(chan pyEvent, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev pyEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	ev, ok := nextEvent(events)
	if !ok || ev.Event != "listening" {
		t.Fatalf("server.py did not start (got %+v)", ev)
	}
	return "127.0.0.1:" + strconv.Itoa(ev.Port), events
}

// nextEvent waits up to 30 s for the next event of server.py.
func nextEvent(events <-chan pyEvent) (pyEvent, bool) {
	select {
	case ev, ok := <-events:
		return ev, ok
	case <-time.After(30 * time.Second):
		return pyEvent{}, false
	}
}

// Our client → their server.
func TestInteropPyServer(t *testing.T) {
	py := rsocketPy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr, events := startPyServer(t, ctx, py)
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	in, outm := &frameMeter{}, &frameMeter{}
	c, err := rsocket.ClientConn(ctx, meteredConn{nc, in, outm}, rsocket.WithMaxFrameSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const dir = interopSvDir
	cases := map[string]func(t *testing.T, ctx context.Context) string{
		"request_response": func(t *testing.T, ctx context.Context) string {
			p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte("meta"), Data: []byte("hello")})
			if err != nil || string(p.Data) != "hello" || string(p.Metadata) != "meta" {
				t.Fatalf("got %q/%q, %v", p.Data, p.Metadata, err)
			}
			return fmt.Sprintf("data %q metadata %q echoed", p.Data, p.Metadata)
		},
		"fire_and_forget": func(t *testing.T, ctx context.Context) string {
			if err := c.FireAndForget(ctx, rsocket.Payload{Data: []byte("fnf-from-go")}); err != nil {
				t.Fatal(err)
			}
			ev, ok := nextEvent(events)
			if !ok || ev.Event != "fnf" || ev.Data != "fnf-from-go" {
				t.Fatalf("server event %+v (ok %v)", ev, ok)
			}
			return "server got " + strconv.Quote(ev.Data)
		},
		"metadata_push": func(t *testing.T, ctx context.Context) string {
			if err := c.MetadataPush(ctx, []byte("push-from-go")); err != nil {
				t.Fatal(err)
			}
			ev, ok := nextEvent(events)
			if !ok || ev.Event != "metadata_push" || ev.Metadata != "push-from-go" {
				t.Fatalf("server event %+v (ok %v)", ev, ok)
			}
			return "server got " + strconv.Quote(ev.Metadata)
		},
		"request_stream": func(t *testing.T, ctx context.Context) string {
			s, err := c.RequestStream(ctx, rsocket.Payload{Data: []byte("10")}, 3)
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(s)
			if err != nil || strings.Join(got, ",") != "0,1,2,3,4,5,6,7,8,9" {
				t.Fatalf("got %q, %v", got, err)
			}
			return fmt.Sprintf("10 elements in REQUEST_N batches of 3: %v", got)
		},
		"request_channel": func(t *testing.T, ctx context.Context) string {
			ch, err := c.RequestChannel(ctx, rsocket.Payload{Data: []byte("a")}, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{"b", "c"} {
				if err := ch.Send(rsocket.Payload{Data: []byte(d)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := ch.Complete(); err != nil {
				t.Fatal(err)
			}
			got, err := collect(&ch.Stream)
			if err != nil || strings.Join(got, ",") != "a,b,c" {
				t.Fatalf("got %q, %v", got, err)
			}
			return fmt.Sprintf("echoed %v, completed", got)
		},
		"error": func(t *testing.T, ctx context.Context) string {
			err := wantApplicationError(t, ctx, c)
			return err.Error()
		},
		"cancel": func(t *testing.T, ctx context.Context) string {
			takeFiveThenCancel(t, ctx, c)
			ev, ok := nextEvent(events)
			if !ok || ev.Event != "cancel" || ev.Sent >= 1000000 {
				t.Fatalf("server event %+v (ok %v)", ev, ok)
			}
			return fmt.Sprintf("CANCEL after 5 elements; the server's generator stopped after %d", ev.Sent)
		},
		"concurrent_1000": func(t *testing.T, ctx context.Context) string { return concurrentEchoes(t, ctx, c, 1000) },
		"large_20MiB": func(t *testing.T, ctx context.Context) string {
			data := make([]byte, largePayload)
			for i := range data {
				data[i] = byte(i * 7)
			}
			p, err := c.RequestResponse(ctx, rsocket.Payload{Metadata: []byte("big"), Data: data})
			if err != nil || !bytes.Equal(p.Data, data) || string(p.Metadata) != "big" {
				t.Fatalf("got %d bytes, %v", len(p.Data), err)
			}
			if in.largest() > 1<<20 || outm.largest() > 1<<20 {
				t.Fatalf("a frame over 1 MiB: py sent %v; we sent %v", in, outm)
			}
			return fmt.Sprintf("20 MiB echoed; py sent %v; we sent %v", in, outm)
		},
	}
	for _, name := range pyServerCases {
		t.Run(name, func(t *testing.T) {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			defer ccancel()
			defer func() {
				if t.Failed() {
					record(dir, name, "FAIL", "see the test log")
				}
			}()
			detail := cases[name](t, cctx)
			t.Log(detail)
			record(dir, name, "pass", detail)
		})
	}
}

const (
	interopClDir = "rsocket-py client → sluice server"
	interopSvDir = "sluice client → rsocket-py server"
)

// TestInteropPyDoc runs after the two above (source order) and rewrites or
// checks the rsocket-py rows of docs/rsocket-interop.md.
func TestInteropPyDoc(t *testing.T) {
	pyRows.check(t, len(pyClientCases)+len(pyServerCases))
}
