package codesize

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMeasure: lines and functions of the non-test files only, a method
// named by its receiver's type, a function's length from its func line to
// its closing brace; PackageDirs skips testdata and nested modules.
func TestMeasure(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("p/a.go", "package p\n\ntype T[X any] struct{}\n\nfunc (t *T[X]) M() {\n\t_ = 1\n}\n\nfunc F() {}\n")
	write("p/a_test.go", "package p\n\nfunc G() {\n}\n")
	write("p/testdata/x.go", "package x\n")
	write("nested/go.mod", "module nested\n")
	write("nested/n.go", "package nested\n")
	pkg, err := Measure(root, "p")
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Lines() != 9 || len(pkg.Files) != 1 {
		t.Errorf("Lines %d in %d files, want 9 in 1 (the test file left out)", pkg.Lines(), len(pkg.Files))
	}
	if got := pkg.LongestFunc(); got.Name != "T.M" || got.Lines != 3 || got.Line != 5 || got.Path != "p/a.go" {
		t.Errorf("LongestFunc = %+v, want T.M at p/a.go:5, 3 lines", got)
	}
	if over := pkg.FuncsOver(1); len(over) != 1 || over[0].Name != "T.M" {
		t.Errorf("FuncsOver(1) = %+v, want T.M alone", over)
	}
	dirs, err := PackageDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dirs, []string{"p"}) {
		t.Errorf("PackageDirs = %q, want [p]", dirs)
	}
}
