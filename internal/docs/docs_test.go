package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository, relative to this package.
const root = "../.."

// testName matches the name of a test, fuzz test or benchmark.
var testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z0-9_][A-Za-z0-9_]*\b`)

// testFuncs maps every Test*, Fuzz* and Benchmark* function declared in
// the repository's *_test.go files to the files (slash paths relative to
// the root) declaring it.
func testFuncs(t *testing.T) map[string][]string {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
	funcs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			funcs[string(m[1])] = append(funcs[string(m[1])], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) == 0 {
		t.Fatal("no tests found under the repository root; has this package moved?")
	}
	return funcs
}

// TestReliabilityDocNamesRealTests: every test docs/reliability.md names
// exists, and when a row says where (a file or package in parentheses
// after the names, as in "`TestA`, `TestB` (internal/sink/send_test.go)"),
// it is declared there. A renamed or deleted test then fails here instead
// of leaving a row that promises a check nobody runs.
func TestReliabilityDocNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "reliability.md"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := testFuncs(t)
	where := regexp.MustCompile(`\(([^()]*)\)`)
	named := 0
	for i, line := range strings.Split(string(doc), "\n") {
		lineNo := i + 1
		// Each name belongs to the first parenthesis after it.
		places := where.FindAllStringSubmatchIndex(line, -1)
		for _, loc := range testName.FindAllStringIndex(line, -1) {
			name := line[loc[0]:loc[1]]
			named++
			files, ok := funcs[name]
			if !ok {
				t.Errorf("docs/reliability.md:%d names %s, which no *_test.go declares", lineNo, name)
				continue
			}
			var paths []string
			for _, p := range places {
				if p[0] >= loc[1] {
					var missing []string
					paths, missing = repoPaths(line[p[2]:p[3]])
					for _, m := range missing {
						t.Errorf("docs/reliability.md:%d names %s, which does not exist", lineNo, m)
					}
					break
				}
			}
			if len(paths) > 0 && !declaredUnder(files, paths) {
				sort.Strings(files)
				t.Errorf("docs/reliability.md:%d puts %s in %s; it is declared in %s",
					lineNo, name, strings.Join(paths, ", "), strings.Join(files, ", "))
			}
		}
	}
	if named < 50 {
		t.Errorf("docs/reliability.md names only %d tests; has its format changed?", named)
	}
}

// TestReliabilityDocNamesEveryFuzzTarget: each fuzz target is a decoder's
// promise (any bytes: an error, never a panic), so each has its row in
// docs/reliability.md, and a new decoder's target is not forgotten there.
func TestReliabilityDocNamesEveryFuzzTarget(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "reliability.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, n := range testName.FindAllString(string(doc), -1) {
		named[n] = true
	}
	for name, files := range testFuncs(t) {
		if strings.HasPrefix(name, "Fuzz") && !named[name] {
			t.Errorf("%s (%s) has no row in docs/reliability.md", name, strings.Join(files, ", "))
		}
	}
}

// repoPaths returns the parts of a parenthesis (split at commas and
// semicolons) that are files or directories of the repository, and those
// that look like paths (a slash, or a .go suffix) but do not exist;
// "tmpfs" and other remarks are neither.
func repoPaths(s string) (paths, missing []string) {
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err == nil {
			paths = append(paths, f)
		} else if strings.Contains(f, "/") || strings.HasSuffix(f, ".go") {
			missing = append(missing, f)
		}
	}
	return paths, missing
}

// declaredUnder reports whether one of files is one of paths or inside
// one of them.
func declaredUnder(files, paths []string) bool {
	for _, f := range files {
		for _, p := range paths {
			if f == p || strings.HasPrefix(f, strings.TrimSuffix(p, "/")+"/") {
				return true
			}
		}
	}
	return false
}
