package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/sink"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// daemonFlagSets builds the FlagSet of every daemon the defaults table
// covers, exactly as the commands build them.
func daemonFlagSets() map[string]*flag.FlagSet {
	agentFS, _ := newAgentFlags(io.Discard)
	sinkFS, _ := newSinkFlags(io.Discard)
	return map[string]*flag.FlagSet{defaults.Agent: agentFS, defaults.Sink: sinkFS}
}

// Every flag of agent and sink has its default from internal/defaults,
// and every table entry is a flag of the daemons it names.
func TestFlagDefaultsFromTable(t *testing.T) {
	for daemon, fs := range daemonFlagSets() {
		fs.VisitAll(func(f *flag.Flag) {
			e, ok := defaults.Lookup(daemon, f.Name)
			if !ok {
				t.Errorf("sluice %s --%s is not in internal/defaults.Table", daemon, f.Name)
				return
			}
			if f.DefValue != e.Default() {
				t.Errorf("sluice %s --%s: flag default %q, table %q", daemon, f.Name, f.DefValue, e.Default())
			}
		})
	}
	sets := daemonFlagSets()
	for _, e := range defaults.Table {
		for _, d := range e.Daemons {
			fs, ok := sets[d]
			if !ok {
				t.Errorf("table entry %s names daemon %q, which has no FlagSet here", e.Flag, d)
			} else if fs.Lookup(e.Flag) == nil {
				t.Errorf("table entry %s: sluice %s has no such flag", e.Flag, d)
			}
		}
	}
}

// `sluice config defaults` lists every flag of agent and sink, in the text
// table and in --json.
func TestConfigDefaultsListsEveryFlag(t *testing.T) {
	code, out, errOut := run("config", "defaults")
	if code != 0 || errOut != "" {
		t.Fatalf("sluice config defaults: exit %d, stderr %q", code, errOut)
	}
	lines := map[string]string{} // "flag daemon" -> line
	for _, l := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(l); len(f) >= 3 {
			for _, d := range strings.Split(f[1], ",") {
				lines[f[0]+" "+d] = l
			}
		}
	}
	code, js, errOut := run("config", "defaults", "--json")
	if code != 0 || errOut != "" {
		t.Fatalf("sluice config defaults --json: exit %d, stderr %q", code, errOut)
	}
	var rs []defaults.Row
	if err := json.Unmarshal([]byte(js), &rs); err != nil {
		t.Fatalf("--json output: %v\n%s", err, js)
	}
	inJSON := map[string]defaults.Row{}
	for _, r := range rs {
		for _, d := range r.Daemons {
			inJSON[r.Key+" "+d] = r
		}
	}
	for daemon, fs := range daemonFlagSets() {
		fs.VisitAll(func(f *flag.Flag) {
			l, ok := lines[f.Name+" "+daemon]
			if !ok {
				t.Errorf("sluice config defaults: no line for %s --%s", daemon, f.Name)
			} else if def := strings.Fields(l)[2]; def != defaults.Shown(f.DefValue) {
				t.Errorf("sluice config defaults: %s --%s shows %q, the flag's default is %q", daemon, f.Name, def, f.DefValue)
			}
			if r, ok := inJSON[f.Name+" "+daemon]; !ok || r.Default != f.DefValue || r.Meaning == "" {
				t.Errorf("--json: %s --%s: %+v (present %v), flag default %q", daemon, f.Name, r, ok, f.DefValue)
			}
		})
	}
	// Values in base units, for programs.
	if r := inJSON["spool-quota agent"]; r.Value != float64(defaults.SpoolQuota) || r.Type != "size" {
		t.Errorf("--json spool-quota: %+v, want value %d (bytes), type size", r, defaults.SpoolQuota)
	}
	if r := inJSON["linger agent"]; r.Value != defaults.Linger.Seconds() || r.Type != "duration" {
		t.Errorf("--json linger: %+v, want value %v (seconds), type duration", r, defaults.Linger.Seconds())
	}
}

// docs/configuration.md holds the table `sluice config defaults --markdown`
// prints, between two markers.
func TestConfigurationDocTable(t *testing.T) {
	const path = "../../docs/configuration.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- defaults table: begin -->\n", "<!-- defaults table: end -->"
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q section", path, strings.TrimSpace(begin), end)
	}
	if got, want := s[i+len(begin):j], defaults.Markdown(defaults.Rows("")); got != want {
		t.Errorf("%s: the defaults table differs from the code; replace it with the output of\n"+
			"  go run ./cmd/sluice config defaults --markdown\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// parseAgent parses agent flags as runAgent does.
func parseAgent(t *testing.T, args ...string) (*agentCmd, error) {
	t.Helper()
	fs, c := newAgentFlags(io.Discard)
	return c, parseDaemonFlags(fs, args, &c.configFile, defaults.Agent)
}

func TestConfigFileSetsFlags(t *testing.T) {
	p := writeConfig(t, `# an agent
sink: [a:7400, b:7400]
spool: /var/spool/sluice
spool-quota: 64MiB
linger: 7ms
insecure-token: true
window: 32
`)
	c, err := parseAgent(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if c.sink != "a:7400,b:7400" || c.spool != "/var/spool/sluice" || c.af.quota != 64<<20 || c.af.linger != 7*time.Millisecond ||
		!c.cf.insecureToken || c.af.window != "32" {
		t.Errorf("config file: %+v", c)
	}
	// Untouched flags keep their defaults.
	if c.af.maxMessage != defaults.AgentMaxMessage || c.ingest != defaults.IngestAddr {
		t.Errorf("defaults lost: max-message %d, ingest %q", c.af.maxMessage, c.ingest)
	}
	// The comma-separated form of a list is the flag's own.
	c, err = parseAgent(t, "--config", writeConfig(t, "sink: a:7400,b:7400\n"))
	if err != nil || c.sink != "a:7400,b:7400" {
		t.Errorf("sink: a:7400,b:7400: %q, %v", c.sink, err)
	}
	// The sink's flags too.
	fs, s := newSinkFlags(io.Discard)
	if err := parseDaemonFlags(fs, []string{"--config", writeConfig(t, "listen: 127.0.0.1:7400\nqueue-bytes: 8MiB\nmax-consumers: 3\nhello-timeout: 1m\n")}, &s.configFile, defaults.Sink); err != nil {
		t.Fatal(err)
	}
	if s.listen != "127.0.0.1:7400" || s.queueBytes != 8<<20 || s.maxConsumers != 3 || s.helloTimeout != time.Minute {
		t.Errorf("sink config file: %+v", s)
	}
}

func TestConfigFileCommandLineWins(t *testing.T) {
	p := writeConfig(t, "spool-quota: 64MiB\nlinger: 7ms\nsink: a:1\n")
	for _, args := range [][]string{
		{"--config", p, "--spool-quota", "8MiB", "--sink", "c:3"},
		{"--spool-quota", "8MiB", "--config", p, "--sink=c:3"}, // order does not matter
	} {
		c, err := parseAgent(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if c.af.quota != 8<<20 || c.sink != "c:3" || c.af.linger != 7*time.Millisecond {
			t.Errorf("%q: quota %d, sink %q, linger %v; want the command line's 8MiB and c:3, the file's 7ms", args, c.af.quota, c.sink, c.af.linger)
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"unknown key", "spool: /x\n\nspool-qouta: 1GiB\n", []string{":3: ", `unknown key "spool-qouta"`, "sluice agent"}},
		{"sink flag on agent", "spool: /x\nqueue-bytes: 1MiB\n", []string{":2: ", `unknown key "queue-bytes"`}},
		{"bad size", "spool-quota: lots\n", []string{":1: ", "spool-quota", "lots", "want a size"}},
		{"bad duration", "linger:\n  5\n", []string{":2: ", "linger", "want a duration"}},
		{"bad bool", "insecure-token: maybe\n", []string{":1: ", "insecure-token"}},
		{"list for a single value", "spool: [a, b]\n", []string{":1: ", "spool", "one value, not a list"}},
		{"mapping", "spool-quota:\n  size: 1GiB\n", []string{":2: ", "spool-quota", "not a mapping"}},
		{"no value", "linger:\n", []string{":1: ", "linger", "no value"}},
		{"repeated key", "linger: 1ms\nlinger: 2ms\n", []string{":2: ", "repeats", "line 1"}},
		{"config names another", "config: other.yaml\n", []string{":1: ", "config"}},
		{"not a mapping", "- spool: /x\n", []string{":1: ", "mapping"}},
		{"bad YAML", "spool: [a\n", []string{"sluice.yaml"}},
	} {
		p := writeConfig(t, c.text)
		_, err := parseAgent(t, "--config", p)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q does not name the file", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not contain %q", c.name, err, w)
			}
		}
	}
	if _, err := parseAgent(t, "--config", filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	// Empty files and files of comments set nothing.
	for _, text := range []string{"", "# nothing yet\n"} {
		if c, err := parseAgent(t, "--config", writeConfig(t, text)); err != nil || c.af.quota != defaults.SpoolQuota {
			t.Errorf("config %q: %v, quota %d", text, err, c.af.quota)
		}
	}
}

// The daemons report a bad config file as a usage error (exit 2) that
// names the file, the line and the key, before opening anything.
func TestDaemonConfigFileUsageError(t *testing.T) {
	p := writeConfig(t, "listen: 127.0.0.1:0\ndata: /nonexistent\nspool-quota: 1GiB\n")
	code, _, errOut := run("sink", "--config", p)
	if code != 2 || !strings.Contains(errOut, p+":3: unknown key \"spool-quota\"") {
		t.Errorf("sluice sink --config: exit %d, stderr %q", code, errOut)
	}
	p = writeConfig(t, "sink: 127.0.0.1:1\nspool: /nonexistent\nlinger: soon\n")
	code, _, errOut = run("agent", "--config", p)
	if code != 2 || !strings.Contains(errOut, p+":3: linger") {
		t.Errorf("sluice agent --config: exit %d, stderr %q", code, errOut)
	}
}

// A sink and an agent configured by files (the agent's sinks as a YAML
// list, its ingest address overridden on the command line) deliver what
// `sluice produce` sends.
func TestConfigFileDaemonsDeliver(t *testing.T) {
	dir := t.TempDir()
	sinkAddr, ingestAddr, fileIngest := freeAddr(t), freeAddr(t), freeAddr(t)
	sinkConf := writeConfig(t, "listen: "+sinkAddr+"\ndata: "+filepath.Join(dir, "data")+"\nqueue-bytes: 8MiB\nmax-message: 1MiB\n")
	agentConf := writeConfig(t, "sink: ["+sinkAddr+"]\nspool: "+filepath.Join(dir, "spool")+"\ningest: "+fileIngest+
		"\nmax-message: 16KiB\nspool-quota: 8MiB\nlinger: 1ms\nreconnect-max: 200ms\n")
	start(t, "sink", "sink", "--config", sinkConf)
	ag := start(t, "agent", "agent", "--config", agentConf, "--ingest", ingestAddr)
	var want []string
	for i := range 100 {
		want = append(want, "line-"+strconv.Itoa(i))
	}
	input := filepath.Join(dir, "input.txt")
	os.WriteFile(input, []byte(strings.Join(want, "\n")+"\n"), 0o644)
	testwait.For(t, "the agent's ingest on the command line's address", func() bool {
		c, err := net.Dial("tcp", ingestAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if out, err := exec.Command(sluiceBin, "produce", "--agent", ingestAddr, "--file", input).CombinedOutput(); err != nil {
		t.Fatalf("produce: %v\n%s\nagent log:\n%s", err, out, ag.log)
	}
	var got []string
	testwait.For(t, "the records in the store", func() bool {
		out, err := exec.Command(sluiceBin, "consume", "--sink", sinkAddr).Output()
		got = strings.Fields(string(out))
		return err == nil && len(got) >= len(want)
	})
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("consumed %q, want %q", got, want)
	}
	if c, err := net.Dial("tcp", fileIngest); err == nil {
		c.Close()
		t.Errorf("the agent also listens on the file's ingest address %s, which the command line overrode", fileIngest)
	}
}

// TestSinkConnectionFlags: --handshake-timeout, --keepalive-time,
// --keepalive-timeout and --max-consumers-per-peer reach the sink's
// config (they had no flag: the handshake and keepalive deadlines could
// not be changed), their defaults are the sink's own, and zero is refused.
func TestSinkConnectionFlags(t *testing.T) {
	fs, s := newSinkFlags(io.Discard)
	if err := parseDaemonFlags(fs, nil, &s.configFile, defaults.Sink); err != nil {
		t.Fatal(err)
	}
	cfg, err := s.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HandshakeTimeout != defaults.ListenerHandshakeTimeout || cfg.KeepaliveTime != defaults.SinkKeepaliveTime ||
		cfg.KeepaliveTimeout != defaults.SinkKeepaliveTimeout || cfg.MaxConsumersPerPeer != sink.DefaultMaxConsumersPerPeer ||
		cfg.MaxConsumers != sink.DefaultMaxConsumers {
		t.Errorf("defaults: handshake %v, keepalive %v/%v, consumers %d per peer of %d", cfg.HandshakeTimeout,
			cfg.KeepaliveTime, cfg.KeepaliveTimeout, cfg.MaxConsumersPerPeer, cfg.MaxConsumers)
	}
	fs, s = newSinkFlags(io.Discard)
	if err := parseDaemonFlags(fs, []string{"--handshake-timeout", "3s", "--keepalive-time", "7s", "--keepalive-timeout", "2s",
		"--max-consumers-per-peer", "5"}, &s.configFile, defaults.Sink); err != nil {
		t.Fatal(err)
	}
	if cfg, err = s.config(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.HandshakeTimeout != 3*time.Second || cfg.KeepaliveTime != 7*time.Second || cfg.KeepaliveTimeout != 2*time.Second || cfg.MaxConsumersPerPeer != 5 {
		t.Errorf("flags: handshake %v, keepalive %v/%v, consumers per peer %d; want 3s, 7s/2s, 5", cfg.HandshakeTimeout,
			cfg.KeepaliveTime, cfg.KeepaliveTimeout, cfg.MaxConsumersPerPeer)
	}
	for _, flag := range []string{"--handshake-timeout", "--keepalive-time", "--keepalive-timeout", "--max-consumers-per-peer"} {
		var out bytes.Buffer
		err := runSink([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), flag, "0"}, &out, &out)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, flag) {
			t.Errorf("%s 0: %v, want exit 2 naming it", flag, err)
		}
	}
}

// TestDeadLetterAtFlag: --dead-letter-at reaches agent.Config.SetAsideAt
// as a size or a share of --spool-quota (before, only the code's default,
// half the quota, could be had), and what would make the set-aside come
// never or past the quota is refused with exit 2.
func TestDeadLetterAtFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, defaults.SpoolQuota / 2},
		{[]string{"--dead-letter-at", "10%"}, defaults.SpoolQuota / 10},
		{[]string{"--dead-letter-at", "100%"}, defaults.SpoolQuota},
		{[]string{"--dead-letter-at", "64MiB"}, 64 << 20},
		{[]string{"--dead-letter-at", "1"}, 1},
		{[]string{"--spool-quota", "8MiB", "--dead-letter-at", "25%"}, 2 << 20},
	} {
		fs, a := newAgentFlags(io.Discard)
		if err := parseDaemonFlags(fs, c.args, &a.configFile, defaults.Agent); err != nil {
			t.Fatal(err)
		}
		cfg, err := a.af.config("127.0.0.1:1", t.TempDir())
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if cfg.SetAsideAt != c.want {
			t.Errorf("%v: SetAsideAt %d, want %d", c.args, cfg.SetAsideAt, c.want)
		}
	}
	for _, v := range []string{"0", "0%", "101%", "-5%", "2GiB", "half", ""} {
		var out bytes.Buffer
		err := runAgent([]string{"--sink", "127.0.0.1:1", "--spool", t.TempDir(), "--dead-letter-at", v}, &out, &out)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "--dead-letter-at") {
			t.Errorf("--dead-letter-at %q: %v, want exit 2 naming the flag", v, err)
		}
	}
}

// TestConfigurationDocSampleError: the error docs/configuration.md shows
// for a typo in its sample file is the one sluice prints for that file
// with the typo (before, the doc gave line 3 for a key on line 4).
func TestConfigurationDocSampleError(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "```yaml\n# /etc/sluice/agent.yaml\n")
	if i < 0 {
		t.Fatal("docs/configuration.md: no sample agent.yaml")
	}
	sample := s[i+len("```yaml\n"):]
	sample = sample[:strings.Index(sample, "```")]
	j := strings.Index(s, "      sluice agent: /etc/sluice/agent.yaml:")
	if j < 0 {
		t.Fatal("docs/configuration.md: no sample error")
	}
	want := strings.TrimSpace(s[j : j+strings.Index(s[j:], "\n")])
	if !strings.Contains(sample, "spool-quota:") || !strings.Contains(want, `"spool-qouta"`) {
		t.Fatalf("the sample or its error changed: %q", want)
	}
	p := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(sample, "spool-quota:", "spool-qouta:", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run("agent", "--config", p)
	got := strings.TrimSpace(strings.ReplaceAll(errOut, p, "/etc/sluice/agent.yaml"))
	if code != 2 || got != want {
		t.Fatalf("exit %d, stderr %q; docs/configuration.md shows %q", code, got, want)
	}
}
