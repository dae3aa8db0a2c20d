// Package peers finds the RSocket peer implementations that tests run
// against (rsocket-java, built by interop/rsocket-java/setup.sh) and checks
// that a build is of the sources in the tree, so that a stale peer is never
// tested or published; it also starts rsocket-java's servers for the
// interop and resume tests (StartRSocketJavaServer). Only tests import it.
package peers

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// RSocketJava returns the java binary and the rsocket-java peer's
// classpath. repo is the repository's root, relative to the test's
// directory. The build lives in $SLUICE_RSOCKET_JAVA_DIR, default
// ~/.cache/sluice/rsocket-java. The error says what is missing and how to
// build it.
func RSocketJava(repo string) (java, classpath string, err error) {
	dir := os.Getenv("SLUICE_RSOCKET_JAVA_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "sluice", "rsocket-java")
	}
	java, err = exec.LookPath("java")
	var cp []byte
	if err == nil {
		cp, err = os.ReadFile(filepath.Join(dir, "classpath.txt"))
	}
	if err == nil {
		err = javaBuildCurrent(filepath.Join(repo, "interop", "rsocket-java"), dir)
	}
	if err != nil {
		return "", "", fmt.Errorf("rsocket-java peer not built (%v): run interop/rsocket-java/setup.sh", err)
	}
	return java, strings.TrimSpace(string(cp)), nil
}

// javaBuildCurrent checks that the build in dir is of the sources in src,
// as setup.sh records it: sha256 of pom.xml, then of the .java files in
// sorted order.
func javaBuildCurrent(src, dir string) error {
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

// JVMFlags go before -cp on every java command line of a test: without a
// perf data file a JVM cannot meet another's stale one in /tmp (a locked
// /tmp/hsperfdata_USER/PID makes it print a warning where the test reads
// its results), and it starts a little faster.
const JVMFlags = "-XX:-UsePerfData"

// RSocketJS returns node and the node_modules that hold rsocket-js
// (installed by interop/rsocket-js/setup.sh into $SLUICE_RSOCKET_JS_DIR,
// default ~/.cache/sluice/rsocket-js). Run its scripts with
// NODE_PATH=modules. The error says what is missing.
func RSocketJS() (node, modules string, err error) {
	dir := os.Getenv("SLUICE_RSOCKET_JS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "sluice", "rsocket-js")
	}
	modules = filepath.Join(dir, "node_modules")
	node, err = exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "rsocket-core", "package.json"))
	}
	if err != nil {
		return "", "", fmt.Errorf("rsocket-js not installed (%v): run interop/rsocket-js/setup.sh or set SLUICE_RSOCKET_JS_DIR", err)
	}
	return node, modules, nil
}
