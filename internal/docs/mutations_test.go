package docs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// mutant is one row of the mutation table: the build tag, the package of
// its killing test (slash path from the root), the test and the invariant
// category its failure must name.
type mutant struct{ pkg, test, invariant string }

// TestMutationTableMatchesCode: docs/simulation.md's mutation table,
// scripts/mutate.sh's list and the mutation_* build tags in the code name
// the same mutants, with the same killing test and invariant, and each
// killing test is declared in its package. A tag added to the code
// without a killing test in the script (so never run), or a row for a
// mutant that no longer exists, fails here.
func TestMutationTableMatchesCode(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "simulation.md"))
	if err != nil {
		t.Fatal(err)
	}
	// | `mutation_x` | what | where | `TestX` (pkg) | `category` |
	docRow := regexp.MustCompile("(?m)^\\| `(mutation_\\w+)` \\|.*\\| `(Test\\w+)` \\(([\\w/.-]+)\\) \\| `([\\w-]+)` \\|$")
	inDoc := map[string]mutant{}
	for _, m := range docRow.FindAllStringSubmatch(string(doc), -1) {
		inDoc[m[1]] = mutant{m[3], m[2], m[4]}
	}

	script, err := os.ReadFile(filepath.Join(root, "scripts", "mutate.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// "mutation_x|./pkg/|TestX|category"
	scriptRow := regexp.MustCompile(`(?m)^\s*"(mutation_\w+)\|\./([\w/.-]+)/\|(Test\w+)\|([\w-]+)"$`)
	inScript := map[string]mutant{}
	for _, m := range scriptRow.FindAllStringSubmatch(string(script), -1) {
		inScript[m[1]] = mutant{m[2], m[3], m[4]}
	}

	buildTag := regexp.MustCompile(`mutation_\w+`)
	inCode := map[string][]string{} // tag → files whose build line names it
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		first, _, _ := strings.Cut(string(src), "\n")
		if !strings.HasPrefix(first, "//go:build ") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, tag := range buildTag.FindAllString(first, -1) {
			inCode[tag] = append(inCode[tag], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if len(inCode) < 10 {
		t.Errorf("%d mutation tags in the code, want at least ten", len(inCode))
	}
	funcs := testFuncs(t)
	all := map[string]bool{}
	for _, set := range []map[string]mutant{inDoc, inScript} {
		for tag := range set {
			all[tag] = true
		}
	}
	for tag := range inCode {
		all[tag] = true
	}
	tags := make([]string, 0, len(all))
	for tag := range all {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	for _, tag := range tags {
		d, okDoc := inDoc[tag]
		s, okScript := inScript[tag]
		files, okCode := inCode[tag]
		switch {
		case !okCode:
			t.Errorf("%s: listed (docs %v, script %v) but no build tag in the code sets it", tag, okDoc, okScript)
			continue
		case !okScript:
			t.Errorf("%s: build tag in %v but no row in scripts/mutate.sh, so nothing runs it", tag, files)
			continue
		case !okDoc:
			t.Errorf("%s: in scripts/mutate.sh but no row in docs/simulation.md's mutation table", tag)
			continue
		case d != s:
			t.Errorf("%s: docs/simulation.md says %+v, scripts/mutate.sh %+v", tag, d, s)
		}
		declared := false
		for _, f := range funcs[s.test] {
			declared = declared || path.Dir(f) == s.pkg
		}
		if !declared {
			t.Errorf("%s: killing test %s is not declared in %s (found in %v)", tag, s.test, s.pkg, funcs[s.test])
		}
	}
}
