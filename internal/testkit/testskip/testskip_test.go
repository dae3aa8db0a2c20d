package testskip

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	if s := Summary(strings.NewReader("")); s != "" {
		t.Errorf("no skips: %q, want nothing", s)
	}
	got := Summary(strings.NewReader(
		"Kafka\tSLUICE_KAFKA\tinternal/sink\tTestKafka/a\n" +
			"Kafka\tSLUICE_KAFKA\tcmd/sluice\tTestKafkaSinkCrash\n" +
			"Kafka\tSLUICE_KAFKA\tinternal/sink\tTestKafka/a\n" + // the same test twice (-count=2): once
			"root (a tmpfs)\t\tseglog\tTestRealDiskFull\n" +
			"torn line\n"))
	want := "\nsluice: 3 tests skipped, for what this machine lacks (go test -v names them):\n" +
		"  Kafka: 2 (cmd/sluice, internal/sink); SLUICE_KAFKA=require fails them instead\n" +
		"  root (a tmpfs): 1 (seglog)\n" +
		"sluice: scripts/test-all.sh installs the parts and runs everything (as root for the tmpfs tests)\n"
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}

// TestSummaryEndsTheRun runs `go test` on a package whose tests skip for
// missing parts (testdata/skipper), as the README's command runs every
// package: its output, which shows nothing of a passing package but its
// "ok" line, ends with the summary of the skips (issue 23: they were
// invisible). With SLUICE_KAFKA=require the Kafka test fails instead.
func TestSummaryEndsTheRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	run := func(env ...string) (string, error) {
		cmd := exec.Command(goBin, "test", "-count=1", "./testdata/skipper/")
		cmd.Env = append(os.Environ(), env...)
		// The watcher writes to this command's stderr; CombinedOutput
		// returns once every writer of the pipe closed it, so after it.
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("SLUICE_KAFKA=")
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	want := "ok  \tgithub.com/sluicehq/sluice/internal/testkit/testskip/testdata/skipper"
	i := strings.Index(out, want)
	j := strings.Index(out, "sluice: 2 tests skipped")
	if i < 0 || j < i || !strings.Contains(out[j:], "  Kafka: 1 (internal/testkit/testskip/testdata/skipper); SLUICE_KAFKA=require fails them instead\n") ||
		!strings.Contains(out[j:], "  "+Root+": 1 (internal/testkit/testskip/testdata/skipper)\n") ||
		!strings.HasSuffix(out, "sluice: scripts/test-all.sh installs the parts and runs everything (as root for the tmpfs tests)\n") {
		t.Fatalf("go test's output does not end with the summary of the skips:\n%s", out)
	}
	out, err = run("SLUICE_KAFKA=require")
	if err == nil || !strings.Contains(out, "no Kafka here (SLUICE_KAFKA=require)") || !strings.Contains(out, "--- FAIL: TestNeedsKafka") {
		t.Fatalf("with SLUICE_KAFKA=require: %v\n%s", err, out)
	}
}
