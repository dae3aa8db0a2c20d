package rwbench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
)

// proc is a child process of the bench (Prometheus, sluice agent or
// sink), its output kept for the error that reports its failure.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	addr string        // its HTTP address, for Prometheus
	done chan struct{} // closed when it has exited
	err  error         // how it exited, once done is closed
}

func startProc(name, bin string, args ...string) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop asks the process to end and kills it after a grace period.
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// exited says whether the process has ended (before the bench stopped it).
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to end by itself.
func (p *proc) wait() error {
	<-p.done
	return p.err
}

func (p *proc) fail(err error) error {
	out := p.out.String()
	if len(out) > 4000 {
		out = "..." + out[len(out)-4000:]
	}
	return fmt.Errorf("%s: %v\n%s", p.name, err, out) // %v: main takes an *exec.ExitError for its own exit code
}

// waitFor polls cond every 200 ms until it holds, ctx ends, limit passes
// or one of the processes the bench depends on has exited.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool, procs ...*proc) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		for _, p := range procs {
			if p.exited() {
				return p.fail(fmt.Errorf("exited while waiting for %s", what))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// ready says whether the HTTP server at addr answers path with 200.
func ready(addr, path string) bool {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// counter sums every series of the metric name on the /metrics page at addr.
func counter(addr, name string) (float64, error) {
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s has no %s", addr, name)
	}
	return sum, nil
}

// query evaluates a PromQL expression of one scalar result at the
// Prometheus at addr; an empty result is 0.
func query(addr, expr string, at time.Time) (float64, error) {
	v := url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	resp, err := httpClient.Get("http://" + addr + "/api/v1/query?" + v.Encode())
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", expr, r.Error)
	}
	if len(r.Data.Result) == 0 {
		return 0, nil
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// windowSamples counts the samples of the series matching selector in
// window (a PromQL range such as "[60000ms]") ending at at. It counts
// per metric name: count_over_time drops names, so over all series at
// once it would fail on duplicate label sets.
func windowSamples(addr, selector, window string, at time.Time) (float64, error) {
	resp, err := httpClient.Get("http://" + addr + "/api/v1/label/__name__/values")
	if err != nil {
		return 0, err
	}
	var names struct {
		Data []string `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&names)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, name := range names.Data {
		n, err := query(addr, "sum(count_over_time("+name+"{"+selector+"}"+window+"))", at)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}
