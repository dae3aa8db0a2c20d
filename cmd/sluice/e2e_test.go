package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sluicehq/sluice/internal/testkit/syncbuf"
	"github.com/sluicehq/sluice/internal/testkit/testwait"
)

// sluiceBin is the binary under test, built once by TestMain.
var sluiceBin string

// TestMain builds the binary for the end-to-end tests. Through
// testscript.Main the test binary is also the `sluice` of the transcript
// scripts (script_test.go): run under that name, it is runMain.
func TestMain(m *testing.M) {
	testscript.Main(buildingM{m}, map[string]func(){
		"sluice": func() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// buildingM builds sluiceBin around the tests.
type buildingM struct{ m *testing.M }

func (b buildingM) Run() int {
	dir, err := os.MkdirTemp("", "sluice-e2e-bin-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sluiceBin = filepath.Join(dir, "sluice")
	if out, err := exec.Command("go", "build", "-o", sluiceBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sluice: %v\n%s", err, out)
		return 1
	}
	return b.m.Run()
}

// proc is a sluice process started by a test.
type proc struct {
	t    *testing.T
	name string
	args []string
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	// earlier holds the output of the incarnations before a restart, so a
	// failing test can show what a killed process said last.
	earlier []string
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, args: args}
	p.start()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.logTail()
		}
	})
	return p
}

// logTail logs the last lines of each incarnation's output.
func (p *proc) logTail() {
	const lines = 30
	for i, out := range append(p.earlier, p.log.String()) {
		ls := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(ls) > lines {
			ls = ls[len(ls)-lines:]
		}
		p.t.Logf("%s (run %d of %d), last lines:\n%s", p.name, i+1, len(p.earlier)+1, strings.Join(ls, "\n"))
	}
}

func (p *proc) start() {
	p.t.Helper()
	if p.log != nil {
		p.earlier = append(p.earlier, p.log.String())
	}
	p.log = &syncbuf.Buffer{}
	p.cmd = exec.Command(sluiceBin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) kill() {
	if p.cmd != nil && p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

func (p *proc) restart() {
	p.t.Helper()
	p.kill()
	p.start()
}

// freeAddr returns a loopback address that was free a moment ago, for a
// process the test starts later. The port is below Linux's ephemeral
// range (32768–60999): a port the kernel handed out for a listener's :0
// is also what it hands to outgoing connections, and another package's
// test, running in parallel, took one in the gap between this check and
// the process's bind (a chaos test failed on it: the agent never
// listened). No port is handed out twice in one test binary: two calls
// in a test (the agent's ingest and metrics ports) would otherwise get
// the same port once in about 12,000 pairs, and one process of the two
// would not start.
func freeAddr(t *testing.T) string {
	t.Helper()
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for range 200 {
		port := 20000 + rand.Intn(12000)
		if handedOut[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		handedOut[port] = true
		return l.Addr().String()
	}
	t.Fatal("no free port in 20000–31999 after 200 tries")
	return ""
}

var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
)

// metric reads one counter from a Prometheus endpoint (-1 if unreachable).
func metric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestEndToEndCrashes sends 100k records through `sluice produce` to a real
// agent and sink, SIGKILLs the agent and the sink in turn, three times each,
// while delivery is in progress (each kill waits for acks to flow), restarts
// them, and checks that `sluice consume` prints exactly the input multiset:
// nothing lost, nothing duplicated.
func TestEndToEndCrashes(t *testing.T) { eachTransport(t, testEndToEndCrashes) }

func testEndToEndCrashes(t *testing.T, transport string) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	input := filepath.Join(dir, "input.txt")
	var want []string
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		line := fmt.Sprintf("rec-%06d cpu_seconds_total{host=\"h%d\",core=\"%d\"} %d", i, rng.Intn(500), rng.Intn(64), rng.Int63())
		want = append(want, line)
		buf.WriteString(line + "\n")
	}
	os.WriteFile(input, buf.Bytes(), 0o644)

	sk := newE2ESink(t, transport)
	sinkAddr, ingestAddr, agentMetrics := sk.grpc, freeAddr(t), freeAddr(t)
	sink := start(t, "sink", sk.sinkArgs("--data", filepath.Join(dir, "sink"))...)
	ag := start(t, "agent", "agent", "--sink", sk.agentSink(sk.deliveryAddr()), "--spool", filepath.Join(dir, "spool"),
		"--ingest", ingestAddr, "--metrics", agentMetrics, "--max-message", "16KiB", "--min-rto", "200ms")
	// Small batches so producing takes long enough to crash things under it.
	producer := exec.Command(sluiceBin, "produce", "--agent", ingestAddr, "--file", input, "--batch-bytes", "16KiB")
	var produceLog bytes.Buffer
	producer.Stdout, producer.Stderr = &produceLog, &produceLog
	if err := producer.Start(); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- producer.Wait() }()

	acked := func() float64 { return metric(agentMetrics, "sluice_agent_acked_records_total") }
	for round := 0; round < 3; round++ {
		testwait.For(t, "acks", func() bool { return acked() > 0 })
		t.Logf("round %d: SIGKILL agent after %.0f records acked by this agent process", round, acked())
		ag.restart()
		testwait.For(t, "acks after the agent restart", func() bool { return acked() > 0 })
		t.Logf("round %d: SIGKILL sink after %.0f records acked by this agent process", round, acked())
		sink.restart()
	}
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("produce: %v\n%s", err, produceLog.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("produce did not finish\n%s", produceLog.String())
	}
	t.Logf("produce: %s", strings.TrimSpace(produceLog.String()))

	var got []string
	testwait.For(t, "every record in the store", func() bool {
		out, err := exec.Command(sluiceBin, "consume", "--sink", sinkAddr).Output()
		if err != nil {
			return false
		}
		got = strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		return len(got) >= n
	})
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("store holds %d records, input had %d (duplicates?)\nagent log:\n%s\nsink log:\n%s", len(got), len(want), ag.log, sink.log)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d differs: got %q want %q", i, got[i], want[i])
		}
	}
}
