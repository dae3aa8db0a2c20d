package rsocket

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/peers"
)

// TestResumeJavaClient: rsocket-java 1.1.5's client with resumption on
// (interop/rsocket-java, `Peer resume-stream`) asks sluice's server for a
// request-stream of 200,000 elements through a proxy that cuts the
// connection 8 times at seeded random offsets, over TCP and over
// WebSocket; it resumes each time and gets every element once, in order.
func TestResumeJavaClient(t *testing.T) {
	java, cp, err := peers.RSocketJava("..")
	if err != nil {
		if os.Getenv("SLUICE_INTEROP") == "require" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	for i, tr := range []string{"tcp", "ws"} {
		t.Run(tr, func(t *testing.T) {
			const items, cuts = 200_000, 8
			addr, path := resumeServer(t, tr, ResumeConfig{})
			p := newCutProxy(t, addr, uint64(21+i), cuts, 4<<10, 200<<10)
			target := p.addr()
			if tr == "ws" {
				target = "ws://" + p.addr() + path
			}
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, java, peers.JVMFlags, "-cp", cp, "sluice.interop.Peer", "resume-stream", tr, target, "200000").Output()
			if err != nil {
				t.Fatalf("java: %v\n%s", err, out)
			}
			var result string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "RESULT\t") {
					result = l
				}
			}
			if f := strings.Split(result, "\t"); len(f) != 5 || f[3] != "pass" {
				t.Fatalf("rsocket-java's resumed stream: %q", result)
			}
			if got := p.cuts.Load(); got != cuts {
				t.Errorf("the proxy cut %d times, want %d (the stream must outlast the cuts)", got, cuts)
			}
			t.Logf("%s; %d cuts, %d connections", strings.Split(result, "\t")[4], p.cuts.Load(), p.accepted.Load())
		})
	}
}

// TestResumeJavaServer: sluice's client with resumption on asks
// rsocket-java 1.1.5's server (with resume) for a request-stream of
// 200,000 elements through a proxy that cuts the connection 8 times, over
// TCP and over WebSocket; it resumes each time and gets every element
// once, in order.
func TestResumeJavaServer(t *testing.T) {
	java, cp, err := peers.RSocketJava("..")
	if err != nil {
		if os.Getenv("SLUICE_INTEROP") == "require" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	addrs, _ := peers.StartRSocketJavaServer(t, ctx, java, cp, "resume")
	for i, tr := range []string{"tcp", "ws"} {
		t.Run(tr, func(t *testing.T) {
			const items, cuts = 200_000, 8
			p := newCutProxy(t, addrs[tr], uint64(22+i), cuts, 4<<10, 200<<10)
			url := "tcp://" + p.addr()
			if tr == "ws" {
				url = "ws://" + p.addr() + "/"
				// Past the upgrade request and the RESUME: a cut inside
				// them fails a redial instead of breaking a session.
				p.set(func(p *cutProxy) { p.minUpAll = 1024 })
			}
			resumedStreamAt(t, p, url, items, cuts)
		})
	}
}

// TestResumeJSClient: rsocket-js 1.0.0-alpha.3's client with resumption
// on (interop/rsocket-js/resume.js) asks sluice's server for a
// request-stream through a proxy that cuts the connection. rsocket-js
// swaps the major and minor version in its RESUME frame (RSocketConnector:
// majorVersion: setupFrame.minorVersion), so it asks to resume protocol
// 0.1, which our server refuses with REJECTED_RESUME as the spec says; the
// test passes on a complete stream or on exactly that refusal, and fails
// on anything else.
func TestResumeJSClient(t *testing.T) {
	node, modules, err := peers.RSocketJS()
	if err != nil {
		if os.Getenv("SLUICE_INTEROP") == "require" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "interop", "rsocket-js", "resume.js"))
	if err != nil {
		t.Fatal(err)
	}
	const cuts = 4
	addr, _ := resumeServer(t, "tcp", ResumeConfig{})
	p := newCutProxy(t, addr, 41, cuts, 4<<10, 100<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, "tcp://"+p.addr(), "100000")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var r struct {
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("resume.js printed %q: %v", out, err)
	}
	switch {
	case r.OK:
		t.Logf("rsocket-js resumed: %s; %d cuts", r.Detail, p.cuts.Load())
	case strings.Contains(r.Detail, "Incomplete RESUME handshake. Unexpected frame 11"):
		t.Logf("rsocket-js's RESUME (version 0.1: its major and minor swapped) refused, as documented: %s", r.Detail)
	default:
		t.Errorf("rsocket-js with resumption: %s", r.Detail)
	}
}
