package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The package graph in docs/packages.svg is drawn from `go list`: a test
// renders it and fails when the file differs, so the picture in
// docs/architecture.md cannot drift from the code. Regenerate with
//
//	SLUICE_UPDATE_DOCS=1 go test ./internal/docs/ -run TestPackageGraph
const (
	module   = "github.com/sluicehq/sluice"
	graphSVG = "docs/packages.svg"
)

type goPackage struct {
	ImportPath string
	Imports    []string
}

// modulePackages lists the main module's non-test packages and, for each,
// the module packages it imports.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if name == "" {
			name = "(root)"
		}
		var deps []string
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/") {
				deps = append(deps, strings.TrimPrefix(imp, module+"/"))
			}
		}
		sort.Strings(deps)
		pkgs[name] = deps
	}
	return pkgs
}

// layers puts each package one row above the highest package it imports,
// so every edge points down: row 0 holds packages importing nothing of
// the module.
func layers(pkgs map[string][]string) [][]string {
	level := map[string]int{}
	var depth func(p string, seen map[string]bool) int
	depth = func(p string, seen map[string]bool) int {
		if l, ok := level[p]; ok {
			return l
		}
		if seen[p] {
			return 0 // an import cycle cannot compile; guard anyway
		}
		seen[p] = true
		l := 0
		for _, d := range pkgs[p] {
			if dl := depth(d, seen) + 1; dl > l {
				l = dl
			}
		}
		level[p] = l
		return l
	}
	max := 0
	for p := range pkgs {
		if l := depth(p, map[string]bool{}); l > max {
			max = l
		}
	}
	rows := make([][]string, max+1)
	for p, l := range level {
		rows[l] = append(rows[l], p)
	}
	for _, r := range rows {
		sort.Strings(r)
	}
	// Order each layer by the mean position of what its packages import
	// in the layers below (the barycenter heuristic), so edges cross less.
	pos := map[string]float64{}
	for i, p := range rows[0] {
		pos[p] = float64(i)
	}
	for l := 1; l < len(rows); l++ {
		bary := map[string]float64{}
		for _, p := range rows[l] {
			sum, n := 0.0, 0
			for _, d := range pkgs[p] {
				if v, ok := pos[d]; ok {
					sum, n = sum+v, n+1
				}
			}
			if n > 0 {
				bary[p] = sum / float64(n)
			}
		}
		sort.SliceStable(rows[l], func(i, j int) bool { return bary[rows[l][i]] < bary[rows[l][j]] })
		for i, p := range rows[l] {
			pos[p] = float64(i) * float64(len(rows[0])) / float64(len(rows[l]))
		}
	}
	return rows
}

// fill is a package's colour in the graph: the commands, the public
// packages, the product's internal packages, the lab, the test kit and
// the generated code apart.
func fill(pkg string) string {
	switch {
	case strings.HasPrefix(pkg, "internal/lab/"):
		return "#fde7c4"
	case strings.HasPrefix(pkg, "internal/testkit/"):
		return "#e6dcf3"
	case strings.HasPrefix(pkg, "internal/"):
		return "#f4f4f4"
	case strings.HasPrefix(pkg, "cmd/"):
		return "#efe"
	case strings.HasPrefix(pkg, "api/"):
		return "#fee"
	}
	return "#eef"
}

// graphKey labels the colours of fill, each with a package that has it.
var graphKey = []struct{ label, example string }{
	{"cmd/: the program", "cmd/sluice"},
	{"public packages", "seglog"},
	{"internal/: product", "internal/agent"},
	{"internal/lab/: benchmarks, simulation", "internal/lab/bench"},
	{"internal/testkit/: for tests only", "internal/testkit/testpki"},
	{"api/: generated", "api/sluice/v1"},
}

// renderGraph draws the layers top (importers) to bottom (leaves).
func renderGraph(pkgs map[string][]string) []byte {
	rows := layers(pkgs)
	// A layer wider than maxWidth wraps onto more lines of its band.
	const boxH, lineGap, bandGap, charW, pad, gapX, maxWidth = 22, 8, 56, 7, 10, 14, 1100
	type box struct{ x, y, w int }
	boxes := map[string]box{}
	width, y := 0, 20
	for i := len(rows) - 1; i >= 0; i-- {
		x := 20
		for _, p := range rows[i] {
			w := len(p)*charW + 2*pad
			if x > 20 && x+w > maxWidth {
				x, y = 20, y+boxH+lineGap
			}
			boxes[p] = box{x, y, w}
			x += w + gapX
			if x > width {
				width = x
			}
		}
		y += boxH + bandGap
	}
	// The key, below the graph, wrapping as a layer does.
	keys := make([]box, len(graphKey))
	x, y := 20, y-bandGap+20
	for i, k := range graphKey {
		w := len(k.label)*charW + 2*pad
		if x > 20 && x+w > maxWidth {
			x, y = 20, y+boxH+lineGap
		}
		keys[i] = box{x, y, w}
		x += w + gapX
		if x > width {
			width = x
		}
	}
	height := y + boxH + 20
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(`<title>sluice package graph: each package above the packages it imports (generated by internal/docs TestPackageGraph)</title>` + "\n")
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		from := boxes[p]
		for _, d := range pkgs[p] {
			to, ok := boxes[d]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#9aa" stroke-width="0.7"/>`+"\n",
				from.x+from.w/2, from.y+boxH, to.x+to.w/2, to.y)
		}
	}
	for _, p := range names {
		bx := boxes[p]
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="#667"/>`+"\n", bx.x, bx.y, bx.w, boxH, fill(p))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", bx.x+pad, bx.y+15, html.EscapeString(p))
	}
	for i, k := range graphKey {
		bx := keys[i]
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s" stroke="#667"/>`+"\n", bx.x, bx.y, bx.w, boxH, fill(k.example))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", bx.x+pad, bx.y+15, html.EscapeString(k.label))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func TestPackageGraph(t *testing.T) {
	got := renderGraph(modulePackages(t))
	path := filepath.Join(root, graphSVG)
	if os.Getenv("SLUICE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: SLUICE_UPDATE_DOCS=1 go test ./internal/docs/ -run TestPackageGraph)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date: SLUICE_UPDATE_DOCS=1 go test ./internal/docs/ -run TestPackageGraph", graphSVG)
	}
}

// The delivery protocol's generated code and gRPC's status codes stay
// inside the gRPC adapter (docs/architecture.md, "Packages"):
// the agent, the sink, the stores and the client see only
// internal/protocol. A package that needs them must be named here.
func TestOnlyTransportImportsProtobuf(t *testing.T) {
	allowed := map[string]map[string]bool{
		// The test kit's sink client plays an agent and a consumer on the
		// wire for the tests of the sink and of its gRPC server; only
		// tests import it.
		"api/sluice/v1": {"internal/transport/grpctransport": true, "internal/testkit/sinkclient": true},
		// Other gRPC services (file transfer, the agent's OTLP/gRPC
		// receiver) speak gRPC statuses themselves, as does the tap that
		// refuses streams waiting for their first message.
		"google.golang.org/grpc/status": {"internal/transport/grpctransport": true, "internal/transport/grpctransport/firstmsg": true, "internal/xfer/grpcxfer": true, "api/sluice/v1": true, "api/xfer/v1": true,
			"internal/agent/collect/otlpgrpc": true},
	}
	for pkg, imports := range directImports(t, "./...") {
		for _, imp := range imports {
			key := strings.TrimPrefix(imp, module+"/")
			if imp == "google.golang.org/grpc/codes" {
				key = "google.golang.org/grpc/status"
			}
			if ok, restricted := allowed[key]; restricted && !ok[pkg] && pkg != key {
				t.Errorf("%s imports %s; only %v may", pkg, imp, ok)
			}
		}
	}
}

// gRPC itself stays in the transports: the sink and the agent are
// services over internal/protocol that a transport carries
// (docs/architecture.md, "Packages"), so neither may import a
// google.golang.org/grpc package. Those that may are the transports, the
// generated code, file transfer's gRPC adapter and the daemon assembling
// it, the agent's OTLP/gRPC receiver (OTLP/gRPC is a protocol that
// collectors speak to the agent, not a transport of sluice's), the lab, and the test kit's sink client (the wire client of the
// sink's tests, which only tests import). (The token interceptors were internal/auth's, which
// put gRPC under every package holding an auth.Tokens, the sink's
// Config among them.)
func TestOnlyTransportsImportGRPC(t *testing.T) {
	allowed := []string{"api/...", "internal/transport/...", "internal/xfer/grpcxfer", "internal/xfer/serve", "internal/agent/collect/otlpgrpc",
		"internal/lab/...", "internal/testkit/sinkclient"}
	for pkg, imports := range directImports(t, "./...") {
		ok := false
		for _, p := range allowed {
			ok = ok || inPattern(pkg, p)
		}
		for _, imp := range imports {
			if !ok && (imp == "google.golang.org/grpc" || strings.HasPrefix(imp, "google.golang.org/grpc/")) {
				t.Errorf("%s imports %s; only %v may", pkg, imp, allowed)
			}
		}
	}
}

// Among the file transfer packages, protobuf is the gRPC adapter's: the
// store contract, the other adapters and the upload loop are what the
// object-store backend and other transports plug into, and the RSocket
// adapter has its own binary encoding (docs/xfer.md, "RSocket mapping").
// Only internal/xfer/grpcxfer may import api/xfer/v1 or a
// google.golang.org/protobuf package; its daemon (internal/xfer/serve)
// and tests may reach it through grpcxfer.
func TestOnlyGRPCAdapterImportsXferProtobuf(t *testing.T) {
	for pkg, imports := range directImports(t, "./internal/xfer/...") {
		if pkg == "internal/xfer/grpcxfer" {
			continue
		}
		for _, imp := range imports {
			if imp == module+"/api/xfer/v1" || strings.HasPrefix(imp, "google.golang.org/protobuf/") {
				t.Errorf("%s imports %s; among the xfer packages only internal/xfer/grpcxfer may", pkg, imp)
			}
		}
	}
}

// directImports is every import (of the module or not) of the non-test
// files of each package matching pattern, by the package's path in the
// module.
func directImports(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", pattern)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs[strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")] = f[1:]
	}
	return pkgs
}
