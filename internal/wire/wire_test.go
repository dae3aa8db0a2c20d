package wire

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docs/protocol.md states the windows in section 1, "Transport".
func TestProtocolDocWindows(t *testing.T) {
	b, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\d+) MiB per stream, (\d+) MiB per connection`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`docs/protocol.md no longer says "N MiB per stream, M MiB per connection"; keep the sentence or update this test`)
	}
	stream, _ := strconv.Atoi(string(m[1]))
	conn, _ := strconv.Atoi(string(m[2]))
	if stream<<20 != InitialWindowSize || conn<<20 != InitialConnWindowSize {
		t.Errorf("docs/protocol.md: %d MiB per stream, %d MiB per connection; the code: %d MiB and %d MiB",
			stream, conn, InitialWindowSize>>20, InitialConnWindowSize>>20)
	}
}

// The agent's and the sink's gRPC options use these windows. The check
// reads their source, evaluating the constant argument of every
// (With)Initial(Conn)WindowSize call, so it holds whether they name the
// constants of this package or still spell the numbers out.
func TestDaemonsUseWindows(t *testing.T) {
	want := map[string]int64{
		"WithInitialWindowSize": InitialWindowSize, "InitialWindowSize": InitialWindowSize,
		"WithInitialConnWindowSize": InitialConnWindowSize, "InitialConnWindowSize": InitialConnWindowSize,
	}
	for _, dir := range []string{"../transport/grpctransport", "../transport/grpctransport/grpcserve"} {
		fset := token.NewFileSet()
		files := parseNonTestFiles(t, fset, dir)
		consts := map[string]ast.Expr{}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok {
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							consts[name.Name] = vs.Values[i]
						}
					}
				}
				return true
			})
		}
		found := 0
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "grpc" {
					return true
				}
				w, ok := want[sel.Sel.Name]
				if !ok {
					return true
				}
				found++
				got, err := eval(call.Args[0], consts)
				if err != nil {
					t.Errorf("%s: %s: %v", fset.Position(call.Pos()), sel.Sel.Name, err)
				} else if got != w {
					t.Errorf("%s: grpc.%s(%d MiB), want %d MiB (internal/wire)", fset.Position(call.Pos()), sel.Sel.Name, got>>20, w>>20)
				}
				return true
			})
		}
		if found != 2 {
			t.Errorf("%s: %d HTTP/2 window options found, want 2 (stream and connection)", dir, found)
		}
	}
}

// parseNonTestFiles parses the package's Go files in dir, leaving out its
// tests (parser.ParseDir did this, but is deprecated: it ignores build tags).
func parseNonTestFiles(t *testing.T, fset *token.FileSet, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	return files
}

// eval evaluates an integer constant expression: literals, + - * <<,
// parentheses, constants of the same package and of package wire.
func eval(e ast.Expr, consts map[string]ast.Expr) (int64, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return strconv.ParseInt(e.Value, 0, 64)
	case *ast.ParenExpr:
		return eval(e.X, consts)
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return eval(v, consts)
		}
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "wire" {
			switch e.Sel.Name {
			case "InitialWindowSize":
				return InitialWindowSize, nil
			case "InitialConnWindowSize":
				return InitialConnWindowSize, nil
			}
		}
	case *ast.BinaryExpr:
		a, err := eval(e.X, consts)
		if err != nil {
			return 0, err
		}
		b, err := eval(e.Y, consts)
		if err != nil {
			return 0, err
		}
		switch e.Op {
		case token.ADD:
			return a + b, nil
		case token.SUB:
			return a - b, nil
		case token.MUL:
			return a * b, nil
		case token.SHL:
			return a << b, nil
		}
	}
	return 0, fmt.Errorf("cannot evaluate %T %v", e, e)
}
