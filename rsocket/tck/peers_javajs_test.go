// Not peers_java_js_test.go: a _js suffix restricts a file to GOOS=js.

package tck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testkit/peers"
)

// TestConformanceRSocketJava: rsocket-java 1.1.5's echo server
// (interop/rsocket-java, `Peer server`, built by
// interop/rsocket-java/setup.sh into ~/.cache/sluice/rsocket-java). One
// JVM serves TCP and WebSocket (path /).
func TestConformanceRSocketJava(t *testing.T) {
	t.Parallel()
	java, cp, err := peers.RSocketJava(filepath.Join("..", ".."))
	if err != nil {
		peerMissing(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, java, peers.JVMFlags, "-cp", cp, "sluice.interop.Peer", "server")
	// The server runs until its stdin closes; the pipe stays open until
	// the process is killed at the end of the test.
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	ports := startPeer(t, cmd, []string{"tcp", "ws"}, func(line string) (string, int, bool) {
		// LISTEN \t tcp|ws \t PORT
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] != "LISTEN" {
			return "", 0, false
		}
		port, err := strconv.Atoi(f[2])
		return f[1], port, err == nil && port > 0
	})
	conformsAsPublished(t, ctx,
		column{"rsocket-java 1.1.5 (tcp)", fmt.Sprintf("tcp://127.0.0.1:%d", ports["tcp"])},
		column{"rsocket-java 1.1.5 (ws)", fmt.Sprintf("ws://127.0.0.1:%d/", ports["ws"])})
}

// TestConformanceRSocketJS: rsocket-js 1.0.0-alpha.3's echo server
// (interop/rsocket-js/server.js, node_modules installed by
// interop/rsocket-js/setup.sh into ~/.cache/sluice/rsocket-js), one node
// process per transport.
func TestConformanceRSocketJS(t *testing.T) {
	t.Parallel()
	node, modules, err := peers.RSocketJS()
	if err != nil {
		peerMissing(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	var cols []column
	for _, tr := range []string{"tcp", "ws"} {
		cmd := exec.CommandContext(ctx, node, filepath.Join("..", "..", "interop", "rsocket-js", "server.js"), tr)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		ports := startPeer(t, cmd, []string{tr}, jsonListening(tr))
		u := fmt.Sprintf("tcp://127.0.0.1:%d", ports[tr])
		if tr == "ws" {
			u = fmt.Sprintf("ws://127.0.0.1:%d/", ports[tr])
		}
		cols = append(cols, column{"rsocket-js 1.0.0-alpha.3 (" + tr + ")", u})
	}
	conformsAsPublished(t, ctx, cols...)
}
