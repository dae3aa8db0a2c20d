package status

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/internal/testkit/testskip"
)

// A minimal Chrome DevTools Protocol client: enough to open a page,
// evaluate JavaScript in it, collect console errors and take a
// screenshot. It speaks CDP over coder/websocket, which the module already
// uses, instead of chromedp and its dependencies (see docs/status.md).

// findChromium returns the browser to drive: $SLUICE_CHROMIUM, else the
// first of the usual names on PATH. The test skips without one unless
// SLUICE_BROWSER=require (CI), where it fails.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	testskip.Missing(t, "SLUICE_BROWSER", testskip.Browser,
		"no Chromium on PATH (apt-get install chromium, or set SLUICE_CHROMIUM); set SLUICE_BROWSER=require to fail instead")
	return ""
}

type cdpMsg struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type browser struct {
	t      *testing.T
	cmd    *exec.Cmd
	ws     *websocket.Conn
	mu     sync.Mutex
	next   int64
	wait   map[int64]chan cdpMsg
	events func(cdpMsg)
	done   chan struct{}
}

// startBrowser launches a headless Chromium with a fresh profile and
// connects to its DevTools endpoint. The flags keep it off the network
// (this machine's is closed; a page must need none anyway).
func startBrowser(ctx context.Context, t *testing.T, events func(cdpMsg)) *browser {
	t.Helper()
	bin := findChromium(t)
	// Not t.TempDir: its cleanup fails the test when a dying child process
	// writes one more file into the profile.
	profile, err := os.MkdirTemp("", "sluice-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--mute-audio", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		"--user-data-dir="+profile, "about:blank")
	// Chromium forks renderers, a GPU process and crashpad, which keep
	// writing to the profile after the parent dies: run them in their own
	// process group and kill the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	b := &browser{t: t, cmd: cmd, wait: map[int64]chan cdpMsg{}, events: events, done: make(chan struct{})}
	t.Cleanup(func() {
		if b.ws != nil {
			b.ws.Close(websocket.StatusNormalClosure, "")
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		// The group is dead, but the kernel may still be tearing down a
		// child: retry the removal a few times, then leave it to /tmp.
		for range 20 {
			if err = os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("leaving the Chromium profile %s: %v", profile, err)
	})
	found := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	go func() {
		re := regexp.MustCompile(`DevTools listening on (ws://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
			logMu.Lock()
			if log.Len() < 64<<10 {
				log.WriteString(sc.Text() + "\n")
			}
			logMu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(60 * time.Second):
		logMu.Lock()
		defer logMu.Unlock()
		t.Fatalf("%s printed no DevTools address within 60s; its stderr:\n%s", bin, log.String())
	}
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial DevTools %s: %v", url, err)
	}
	ws.SetReadLimit(64 << 20) // screenshots
	b.ws = ws
	go b.read(ctx)
	return b
}

func (b *browser) read(ctx context.Context) {
	defer close(b.done)
	for {
		_, data, err := b.ws.Read(ctx)
		if err != nil {
			return
		}
		var m cdpMsg
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.wait[m.ID]
			delete(b.wait, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if b.events != nil {
			b.events(m)
		}
	}
}

// call sends a command (to session when not "") and decodes its result.
func (b *browser) call(ctx context.Context, session, method string, params, result any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMsg, 1)
	b.wait[id] = ch
	b.mu.Unlock()
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	req, _ := json.Marshal(cdpMsg{ID: id, Method: method, Params: p, SessionID: session})
	if err := b.ws.Write(ctx, websocket.MessageText, req); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: the browser connection closed", method)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// tab is one page target, attached in flat session mode.
type tab struct {
	b       *browser
	session string
}

func (b *browser) newTab(ctx context.Context, width, height int) (*tab, error) {
	var tr struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &tr); err != nil {
		return nil, err
	}
	var ar struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tr.TargetID, "flatten": true}, &ar); err != nil {
		return nil, err
	}
	tb := &tab{b: b, session: ar.SessionID}
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		if err := b.call(ctx, tb.session, m, map[string]any{}, nil); err != nil {
			return nil, err
		}
	}
	err := b.call(ctx, tb.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return tb, err
}

func (tb *tab) navigate(ctx context.Context, url string) error {
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := tb.b.call(ctx, tb.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return errors.New("navigate " + url + ": " + r.ErrorText)
	}
	return nil
}

// eval evaluates expr in the page and decodes its JSON value into out.
func (tb *tab) eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := tb.b.call(ctx, tb.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluate %s: %s", expr, r.ExceptionDetails.Text)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// waitFor polls the boolean expr until it is true or ctx ends; last
// describes the page's state for the failure message.
func (tb *tab) waitFor(ctx context.Context, what, expr string) {
	tb.b.t.Helper()
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var ok bool
		err := tb.eval(ctx, expr, &ok)
		if err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			var state string
			_ = tb.eval(outer, `JSON.stringify({conn: window.sluiceStatus && sluiceStatus.conn, error: window.sluiceStatus && sluiceStatus.error, snapshots: window.sluiceStatus && sluiceStatus.snapshots, ready: document.getElementById("ready").textContent})`, &state)
			tb.b.t.Fatalf("waiting for %s: %v (last error %v); page: %s", what, ctx.Err(), err, state)
		case <-tick.C:
		}
	}
}

func (tb *tab) screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data []byte `json:"data"` // base64 in JSON: decoded by encoding/json
	}
	err := tb.b.call(ctx, tb.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r)
	return r.Data, err
}
