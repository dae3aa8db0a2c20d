package docs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/lab/codesize"
)

// cmd/sluice is flags → config → run (issue 25): servers, renderers,
// launchers and collectors live in the packages that own them, so the
// command stays small enough to read in one sitting and no function in it
// needs a map.
const (
	cmdSluiceMaxLines    = 3000
	cmdSluiceMaxFuncLine = 80
)

// TestCmdSluiceStaysThin: cmd/sluice has at most cmdSluiceMaxLines
// non-test lines and no function over cmdSluiceMaxFuncLine lines (go/ast,
// counted by internal/lab/codesize as scripts/house-report.sh counts).
func TestCmdSluiceStaysThin(t *testing.T) {
	pkg, err := codesize.Measure(root, "cmd/sluice")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Files) == 0 {
		t.Fatal("cmd/sluice has no Go files: the test looks in the wrong place")
	}
	if msg := thinnessFindings(pkg); msg != "" {
		t.Error(msg)
	}
}

// thinnessFindings says what in pkg breaks the limits, naming the
// longest files or the long functions ("" when nothing does).
func thinnessFindings(pkg codesize.Package) string {
	var b strings.Builder
	if n := pkg.Lines(); n > cmdSluiceMaxLines {
		fmt.Fprintf(&b, "cmd/sluice has %d non-test lines, over %d: move what is not flag parsing into the packages that own it; its longest file is %s (%d lines)\n",
			n, cmdSluiceMaxLines, pkg.LongestFile().Path, pkg.LongestFile().Lines)
	}
	for _, f := range pkg.FuncsOver(cmdSluiceMaxFuncLine) {
		fmt.Fprintf(&b, "%s:%d: %s is %d lines, over %d\n", f.Path, f.Line, f.Name, f.Lines, cmdSluiceMaxFuncLine)
	}
	return b.String()
}

// TestThinnessFindingsNameOffenders: the guard fails with the offenders
// named, for both limits, and passes a package within them.
func TestThinnessFindingsNameOffenders(t *testing.T) {
	fat := codesize.Package{
		Files: []codesize.File{{Path: "cmd/sluice/a.go", Lines: 2000}, {Path: "cmd/sluice/b.go", Lines: 1500}},
		Funcs: []codesize.Func{{Path: "cmd/sluice/a.go", Name: "runBig", Line: 10, Lines: 81}, {Path: "cmd/sluice/b.go", Name: "small", Line: 3, Lines: 80}},
	}
	got := thinnessFindings(fat)
	for _, want := range []string{"3500 non-test lines", "cmd/sluice/a.go (2000 lines)", "cmd/sluice/a.go:10: runBig is 81 lines"} {
		if !strings.Contains(got, want) {
			t.Errorf("findings %q do not say %q", got, want)
		}
	}
	if strings.Contains(got, "small") {
		t.Errorf("findings %q name a function of exactly the limit", got)
	}
	thin := codesize.Package{Files: fat.Files[:1], Funcs: fat.Funcs[1:]}
	if got := thinnessFindings(thin); got != "" {
		t.Errorf("a package within the limits: findings %q", got)
	}
}
