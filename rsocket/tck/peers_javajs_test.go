// Not peers_java_js_test.go: a _js suffix restricts a file to GOOS=js.

package tck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConformanceRSocketJava: rsocket-java 1.1.5's echo server
// (interop/rsocket-java, `Peer server`, built by
// interop/rsocket-java/setup.sh into ~/.cache/sluice/rsocket-java). One
// JVM serves TCP and WebSocket (path /).
func TestConformanceRSocketJava(t *testing.T) {
	t.Parallel()
	dir := os.Getenv("SLUICE_RSOCKET_JAVA_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "sluice", "rsocket-java")
	}
	java, err := exec.LookPath("java")
	var cp []byte
	if err == nil {
		cp, err = os.ReadFile(filepath.Join(dir, "classpath.txt"))
	}
	if err == nil {
		err = javaBuildCurrent(dir)
	}
	if err != nil {
		peerMissing(t, fmt.Sprintf("rsocket-java peer not built (%v): run interop/rsocket-java/setup.sh", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, java, "-cp", strings.TrimSpace(string(cp)), "sluice.interop.Peer", "server")
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

// javaBuildCurrent checks that the build in dir is of the sources in the
// tree, as setup.sh records it (sha256 of pom.xml, then the .java files in
// sorted order): a stale peer would publish another server's results.
func javaBuildCurrent(dir string) error {
	src := filepath.Join("..", "..", "interop", "rsocket-java")
	files := []string{filepath.Join(src, "pom.xml")}
	var java []string
	err := filepath.WalkDir(filepath.Join(src, "src"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".java") {
			java = append(java, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(java)
	h := sha256.New()
	for _, f := range append(files, java...) {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		h.Write(b)
	}
	built, err := os.ReadFile(filepath.Join(dir, "hash"))
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(built)) != hex.EncodeToString(h.Sum(nil)) {
		return errors.New("the build in " + dir + " is of other sources")
	}
	return nil
}

// TestConformanceRSocketJS: rsocket-js 1.0.0-alpha.3's echo server
// (interop/rsocket-js/server.js, node_modules installed by
// interop/rsocket-js/setup.sh into ~/.cache/sluice/rsocket-js), one node
// process per transport.
func TestConformanceRSocketJS(t *testing.T) {
	t.Parallel()
	dir := os.Getenv("SLUICE_RSOCKET_JS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "sluice", "rsocket-js")
	}
	modules := filepath.Join(dir, "node_modules")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "rsocket-core", "package.json"))
	}
	if err != nil {
		peerMissing(t, fmt.Sprintf("rsocket-js not installed (%v): run interop/rsocket-js/setup.sh or set SLUICE_RSOCKET_JS_DIR", err))
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
