// Package codesize measures a Go tree the way issue 25's done-means asks:
// non-test lines per file and the length of every function (go/ast), so
// that a report (internal/lab/housereport) and a guard test
// (internal/docs: cmd/sluice stays thin) count the same way.
package codesize

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File is one Go source file and its length in lines.
type File struct {
	Path  string // relative to the tree's root, slash-separated
	Lines int
}

// Func is one function or method and its length in lines, from the line
// of its `func` keyword to the line of its closing brace.
type Func struct {
	Path  string // the file it is in, relative to the tree's root
	Name  string // Recv.Name for a method, Name for a function
	Line  int    // where it starts
	Lines int
}

// Package is what one directory's non-test Go files hold.
type Package struct {
	Dir   string // relative to the tree's root, "." for the root
	Files []File
	Funcs []Func
}

// Lines is the package's non-test lines, all files together.
func (p Package) Lines() int {
	n := 0
	for _, f := range p.Files {
		n += f.Lines
	}
	return n
}

// LongestFile is the package's longest file (zero when it has none).
func (p Package) LongestFile() File {
	var longest File
	for _, f := range p.Files {
		if f.Lines > longest.Lines {
			longest = f
		}
	}
	return longest
}

// LongestFunc is the package's longest function (zero when it has none).
func (p Package) LongestFunc() Func {
	var longest Func
	for _, f := range p.Funcs {
		if f.Lines > longest.Lines {
			longest = f
		}
	}
	return longest
}

// FuncsOver lists the package's functions longer than limit lines,
// longest first.
func (p Package) FuncsOver(limit int) []Func {
	var over []Func
	for _, f := range p.Funcs {
		if f.Lines > limit {
			over = append(over, f)
		}
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].Lines > over[j].Lines })
	return over
}

// Measure reads the non-test Go files of the package in root/dir.
func Measure(root, dir string) (Package, error) {
	pkg := Package{Dir: dir}
	paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		return pkg, err
	}
	sort.Strings(paths)
	fset := token.NewFileSet()
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return pkg, err
		}
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return pkg, err
		}
		pkg.Files = append(pkg.Files, File{Path: rel, Lines: strings.Count(string(src), "\n")})
		file, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return pkg, err
		}
		pkg.Funcs = append(pkg.Funcs, funcsOf(fset, file, rel)...)
	}
	return pkg, nil
}

// funcsOf lists the top-level functions and methods of file.
func funcsOf(fset *token.FileSet, file *ast.File, path string) []Func {
	var funcs []Func
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		funcs = append(funcs, Func{Path: path, Name: funcName(fn), Line: start, Lines: end - start + 1})
	}
	return funcs
}

// funcName is Name, or Recv.Name for a method (the receiver's type
// without its pointer and type parameters).
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// PackageDirs lists the directories under root that hold non-test Go
// files, relative to root, skipping testdata, vendor, hidden directories
// and nested modules (what `go list ./...` in root would see).
func PackageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		has, err := hasNonTestGo(path)
		if err != nil || !has {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dirs = append(dirs, filepath.ToSlash(rel))
		return nil
	})
	return dirs, err
}

func hasNonTestGo(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true, nil
		}
	}
	return false, nil
}
