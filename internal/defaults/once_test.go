package defaults

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// onceGroups are constants, variables and functions that used to be
// defined more than once, and disagreed or could have: each group may
// have one definition in the module's non-test code (usually in this
// package); every other declaration must only name it (x = pkg.Name).
var onceGroups = [][]string{
	{"ProtocolVersion", "protocolVersion"},
	{"syncDir", "SyncDir"},
	{"errDictConflict", "ErrDictionaryConflict"},
	{"maxAgentIDLen", "maxAgentID", "MaxAgentIDLen"},
	{"InitialWindowSize", "HTTP2WindowBytes"},
	{"InitialConnWindowSize"},
	{"kafkaOffsetBits"},
	// Defaults that each layer (agent, sink, delivery) used to define.
	{"DefaultQueueMessages", "DefaultQueueMsgs", "QueueMessages"},
	{"DefaultQueueBytes", "QueueBytes"},
	{"DefaultMaxMessageBytes"},
	{"DefaultInitialRTO", "InitialRTO"},
	{"DefaultMinRTO", "MinRTO"},
	{"DefaultMaxRTO", "MaxRTO"},
	{"DefaultReconnectMin", "ReconnectMin"},
	{"DefaultReconnectMax", "ReconnectMax"},
	{"DefaultHandshakeTimeout", "HandshakeTimeout"},
	{"DefaultProgressTimeout", "ProgressTimeout"},
	{"DefaultKeepaliveTimeout", "KeepaliveTimeout"},
	{"KeepaliveTime"},
}

// knownDuplicates are definitions not yet folded into one, by
// "name file": cmd/sluice/consume.go belongs to the consumer's rework
// (it will use the sink's, or the client package's, constant).
var knownDuplicates = map[string]bool{}

// TestDefinedOnce parses every non-test Go file of the module and checks
// that no group of onceGroups has more than one definition.
func TestDefinedOnce(t *testing.T) {
	defs := definitions(t, "../..")
	for _, g := range onceGroups {
		var where []string
		for _, name := range g {
			for _, file := range defs[name] {
				if knownDuplicates[name+" "+file] {
					t.Logf("known duplicate, to fold: %s in %s", name, file)
					continue
				}
				where = append(where, name+" in "+file)
			}
		}
		if len(where) > 1 {
			t.Errorf("%v: want at most one definition, have %d: %s (others must refer to it, e.g. const x = pkg.Name)", g, len(where), strings.Join(where, "; "))
		}
	}
}

// definitions maps each top-level name declared with a value of its own
// (a literal, an expression, a function body) to the files declaring it.
// A declaration whose value is just another name (x = y, x = pkg.Y) is a
// reference, not a definition. Methods are skipped.
func definitions(t *testing.T, root string) map[string][]string {
	t.Helper()
	defs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					defs[decl.Name.Name] = append(defs[decl.Name.Name], rel)
				}
			case *ast.GenDecl:
				if decl.Tok != token.CONST && decl.Tok != token.VAR {
					continue
				}
				for _, spec := range decl.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) && isReference(vs.Values[i]) {
							continue
						}
						defs[name.Name] = append(defs[name.Name], rel)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

func isReference(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name != "iota" && e.Name != "true" && e.Name != "false" && e.Name != "nil"
	case *ast.SelectorExpr:
		_, ok := e.X.(*ast.Ident)
		return ok
	}
	return false
}
