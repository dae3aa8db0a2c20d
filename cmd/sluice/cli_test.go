package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/cli"
)

// run calls runMain as the binary would and returns its exit status and
// outputs.
func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = runMain(args, &o, &e)
	return code, o.String(), e.String()
}

// commandNames lists every registered command, sorted.
func commandNames() []string { return app.Names() }

// takesPositionals are the commands whose usage names arguments after the
// flags; every other command takes flags only.
var takesPositionals = map[string]bool{"dead-letter clear": true, "dead-letter list": true, "dict train": true, "log check": true, "xfer send": true}

func TestHelpGoesToStdout(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		code, out, errOut := run(args...)
		if code != 0 || !strings.Contains(out, "Commands:") || !strings.Contains(out, "  agent ") || errOut != "" {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want exit 0 and the command list on stdout only", args, code, out, errOut)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, `give a command`},
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		{[]string{"nosuch", "--flag"}, `unknown command "nosuch"`},
		{[]string{"bench", "nosuch"}, `unknown command "bench nosuch"`},
		{[]string{"--nosuch"}, `unknown command "--nosuch"`},
		{[]string{"bench"}, `"bench" needs a subcommand`},
		{[]string{"help", "nosuch"}, `unknown command "nosuch"`},
	} {
		code, out, errOut := run(c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "bench wan") {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want exit 2, %s and the commands on stderr", c.args, code, out, errOut, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errOut := run(args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || errOut != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], "sluice ") ||
			!strings.HasPrefix(lines[1], "commit ") || lines[2] != runtime.Version() {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want version, commit and %s", args, code, out, errOut, runtime.Version())
		}
	}
	// A test binary carries no VCS stamp.
	if _, rev, _ := buildVersion(); rev != "unknown" {
		t.Logf("revision %q (built from a VCS checkout)", rev)
	}
}

func TestBuildInfoMetric(t *testing.T) {
	mfs, err := newRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	ver, rev, gov := buildVersion()
	for _, mf := range mfs {
		if mf.GetName() != "sluice_build_info" {
			continue
		}
		m := mf.GetMetric()
		if len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Fatalf("sluice_build_info: %v, want one gauge of 1", m)
		}
		got := map[string]string{}
		for _, l := range m[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != ver || got["revision"] != rev || got["goversion"] != gov || len(got) != 3 {
			t.Errorf("labels %v, want version=%s revision=%s goversion=%s", got, ver, rev, gov)
		}
		return
	}
	t.Fatal("newRegistry has no sluice_build_info")
}

// Every command answers -h, and `sluice help CMD`, with its usage and
// flags on stdout and exit 0, before doing anything else.
func TestCommandHelp(t *testing.T) {
	for _, name := range commandNames() {
		words := strings.Fields(name)
		for _, args := range [][]string{append(words, "-h"), append(words, "--help"), append([]string{"help"}, words...)} {
			code, out, errOut := run(args...)
			if code != 0 || !strings.HasPrefix(out, "Usage: sluice "+name) || errOut != "" {
				t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want its usage on stdout, exit 0", args, code, out, errOut)
			}
		}
	}
	_, out, _ := run("help", "agent")
	for _, want := range []string{"-spool", "-sink", "(default 1GiB)"} {
		if !strings.Contains(out, want) {
			t.Errorf("sluice help agent lacks %q:\n%s", want, out)
		}
	}
	if code, out, _ := run("help", "bench"); code != 0 || !strings.Contains(out, "bench wan") || !strings.Contains(out, "bench delivery") {
		t.Errorf("sluice help bench: exit %d, %q; want the bench commands", code, out)
	}
}

// TestUsageLinesNameFlags: every command's usage line names only its
// flags, and all of them unless it says [flags] (cli.UsageFindings), so
// it cannot drift from the flag set (`xfer serve -h` omitted five).
func TestUsageLinesNameFlags(t *testing.T) {
	for _, name := range commandNames() {
		_, out, _ := run(append(strings.Fields(name), "-h")...)
		if msg := cli.UsageFindings(out); msg != "" {
			t.Errorf("sluice %s -h: %s\n%s", name, msg, strings.SplitN(out, "\n", 2)[0])
		}
	}
}

// A command that takes no positional arguments rejects them (exit 2)
// instead of ignoring them and running with defaults.
func TestStrayArguments(t *testing.T) {
	for _, name := range commandNames() {
		if takesPositionals[name] {
			continue
		}
		args := append(strings.Fields(name), "stray")
		code, out, errOut := run(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, `unexpected argument "stray"`) {
			t.Errorf("sluice %q: exit %d, stdout %q, stderr %q; want exit 2 and unexpected argument", args, code, out, errOut)
		}
	}
	// A bad flag is a usage error too, with the message on stderr.
	if code, out, errOut := run("version", "--nosuch"); code != 2 || out != "" || !strings.Contains(errOut, "unknown flag --nosuch") {
		t.Errorf("sluice version --nosuch: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A bad value names the flag and what it wants, before anything starts.
	if code, _, errOut := run("agent", "--sink", "127.0.0.1:1", "--spool", t.TempDir(), "--compression-level", "max"); code == 0 ||
		!strings.Contains(errOut, "--compression-level") || !strings.Contains(errOut, "want default, fastest or better") {
		t.Errorf("sluice agent --compression-level max: exit %d, stderr %q", code, errOut)
	}
}

func TestSizesPrinted(t *testing.T) {
	for _, c := range []struct {
		n           int64
		flag, human string
	}{
		{0, "0B", "0 B"},
		{100, "100B", "100 B"},
		{1000, "1000B", "1000 B"},
		{16 << 10, "16KiB", "16 KiB"},
		{1536, "1536B", "1.5 KiB"},
		{256 << 10, "256KiB", "256 KiB"},
		{1 << 30, "1GiB", "1 GiB"},
		{3 << 29, "1536MiB", "1.5 GiB"},
		{384 << 20, "384MiB", "384 MiB"},
		{50e6, "50000000B", "47.7 MiB"},
	} {
		b := byteSize(c.n)
		if got := b.String(); got != c.flag {
			t.Errorf("byteSize(%d).String() = %q, want %q", c.n, got, c.flag)
		}
		if n, err := parseByteSize(b.String()); err != nil || n != c.n {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", b.String(), n, err, c.n)
		}
		if got := humanSize(c.n); got != c.human {
			t.Errorf("humanSize(%d) = %q, want %q", c.n, got, c.human)
		}
	}
	if _, err := parseByteSize("9999999999999GiB"); err == nil {
		t.Error("parseByteSize accepted a size that overflows int64")
	}
}

// The README offers only what a user can use: no call into a package under
// internal/, which other modules cannot import.
func TestReadmeAdvertisesNoInternalAPI(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9]*)\\.[A-Z][A-Za-z0-9]*\\(").FindAllStringSubmatch(string(b), -1) {
		for _, dir := range []string{"../../internal", "../../internal/lab", "../../internal/testkit"} {
			if fi, err := os.Stat(filepath.Join(dir, m[1])); err == nil && fi.IsDir() {
				t.Errorf("README.md advertises %s…`: package %s is internal and cannot be imported", m[0], m[1])
			}
		}
	}
}

// The README's test command is the one CI runs, uncached.
func TestReadmeTestCommandIsCI(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	const cmd = "go test -count=1 ./..."
	if !strings.Contains(string(readme), cmd) || !regexp.MustCompile(`(?m)^go test -count=1 \./\.\.\.$`).Match(ci) {
		t.Errorf("README.md and .ci/run should both run %q", cmd)
	}
}

// TestLogLevelChecked: a --log-level that is not a level is a flag error
// (exit 2, nothing started, nothing created), on the command line of
// every daemon and client that has one and in a config file. Before, it
// logged at info without a word (found by hand: --log-level verbose).
func TestLogLevelChecked(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	conf := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(conf, []byte("sink: 127.0.0.1:1\nspool: "+spool+"\nlog-level: loud\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"agent", "--sink", "127.0.0.1:1", "--spool", spool, "--log-level", "verbose"},
		{"agent", "--config", conf},
		{"sink", "--data", filepath.Join(dir, "data"), "--log-level", "7"},
		{"xfer", "serve", "--dir", filepath.Join(dir, "files"), "--log-level", "loud"},
		{"xfer", "send", "--to", "grpc://127.0.0.1:1", "--log-level", "", conf},
		{"rsocket", "serve", "--listen", "tcp://127.0.0.1:0", "--log-level", "verbose"},
		{"demo", "--log-level", "verbose"},
	} {
		code, _, errOut := run(args...)
		if code != 2 || !strings.Contains(errOut, "want debug, info, warn or error") {
			t.Errorf("sluice %q: exit %d, stderr %q; want exit 2 naming the levels", args, code, errOut)
		}
	}
	for _, d := range []string{spool, filepath.Join(dir, "data"), filepath.Join(dir, "files")} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s was created by a command refused for its --log-level", d)
		}
	}
}

// TestBadAddressesRefusedFirst: an empty listen address (which Listen
// takes for every interface and a random port) and a sink address gRPC
// would never reach (no port: it dials 443; another scheme) end the
// agent before it creates its spool (found by hand: `--ingest ""` served
// an open ingest on [::]:46375; `--sink 127.0.0.1` retried for ever).
// TestFlagValuesChecked: values a flag cannot take are usage errors that
// name the flag (exit 2), before anything is created. Found by hand
// (2026-11-29): --spool-quota 0 was reported as a --dead-letter-at error,
// --spool-sync named the seglog package, --expire -1s was taken, every
// transport was held to gRPC's chunk bound, and settings out of range
// exited 1 naming Go fields only.
func TestFlagValuesChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "a"), "--spool-quota", "0"}, "--spool-quota 0B: want a positive size"},
		{[]string{"agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "a"), "--spool-sync", "sometimes"}, `--spool-sync "sometimes": want always, none, or an interval`},
		{[]string{"xfer", "serve", "--dir", filepath.Join(dir, "a"), "--grpc", "127.0.0.1:0", "--expire", "-1s"}, "--expire must be positive, or 0 (never)"},
		{[]string{"xfer", "send", filepath.Join(dir, "a"), "--to", "grpc://127.0.0.1:1", "--chunk", "16MiB"}, "gRPC and RSocket take 1B .. 8MiB (tus up to 64MiB)"},
		{[]string{"xfer", "send", filepath.Join(dir, "a"), "--to", "http://127.0.0.1:1/files/", "--chunk", "65MiB"}, "64MiB for tus"},
		{[]string{"rsocket", "rr", "--url", "tcp://127.0.0.1:1", "--tls-ca", "/nonexistent.pem", "--data", "x"}, `--tls-* given for "tcp://127.0.0.1:1": use a tls:// or wss:// URL`},
		{[]string{"rsocket", "rr", "--url", "tcp://127.0.0.1", "--data", "x"}, `bad --url "tcp://127.0.0.1": want tcp://HOST:PORT`},
		{[]string{"rsocket", "rr", "--url", "tcp://127.0.0.1:99999", "--data", "x"}, `bad --url "tcp://127.0.0.1:99999"`},
		{[]string{"rsocket", "rr", "--url", "http://127.0.0.1:1", "--data", "x"}, `bad --url "http://127.0.0.1:1"`},
		{[]string{"agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "a"), "--spool-quota", "1KiB"}, "SpoolQuota (--spool-quota) 1KiB below 2MiB"},
		{[]string{"agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "a"), "--linger", "-1s"}, "Linger (--linger) is negative"},
		{[]string{"agent", "--sink", "127.0.0.1:1", "--spool", filepath.Join(dir, "a"), "--compression", "dict"}, "needs a Dictionary (--dict FILE"},
		{[]string{"sink", "--data", filepath.Join(dir, "a"), "--listen", "127.0.0.1:0", "--max-message", "1GiB"}, "MaxMessageBytes (--max-message) 1GiB outside 1B to 256MiB"},
		{[]string{"sink", "--data", filepath.Join(dir, "a"), "--listen", "127.0.0.1:0", "--listen-rsocket", "foo://x"}, `--listen-rsocket: rsocket listen "foo://x": want tcp://HOST:PORT or ws://HOST:PORT/PATH`},
	} {
		code, _, errOut := run(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("sluice %q: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
			t.Fatalf("sluice %q created its directory before refusing", c.args)
		}
	}
}

func TestBadAddressesRefusedFirst(t *testing.T) {
	dir := t.TempDir()
	spool := filepath.Join(dir, "spool")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--sink", "127.0.0.1:1", "--ingest", ""}, 2, "--ingest: empty address"},
		{[]string{"--sink", "127.0.0.1", "--ingest", "127.0.0.1:0"}, 2, "want HOST:PORT (the port is required)"},
		{[]string{"--sink", "tcp://127.0.0.1:1", "--ingest", "127.0.0.1:0"}, 2, "tcp:// is not a sink address"},
	} {
		code, _, errOut := run(append([]string{"agent", "--spool", spool}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("sluice agent %q: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
		if _, err := os.Stat(spool); err == nil {
			t.Fatalf("sluice agent %q created its spool before refusing", c.args)
		}
	}
}

// TestProduceTooLargeNamesBatchBytes: an agent's 413 for a request over
// its quota's half names produce's --batch-bytes, the knob that makes
// requests smaller (found by hand at the minimum quota, 2026-11-29).
func TestProduceTooLargeNamesBatchBytes(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, "agent: record too large: request of 1064268 bytes is over half the spool quota", http.StatusRequestEntityTooLarge)
	}))
	defer agent.Close()
	in := filepath.Join(t.TempDir(), "lines")
	if err := os.WriteFile(in, bytes.Repeat([]byte("a line of text\n"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run("produce", "--agent", agent.URL, "--file", in, "--batch-bytes", "4KiB")
	if code != 1 || !strings.Contains(errOut, "(requests are up to --batch-bytes, 4KiB)") {
		t.Fatalf("exit %d, stderr %q; want 1 and --batch-bytes named", code, errOut)
	}
}
