package docs

import (
	"os"
	"strings"
	"testing"
)

// competitorModules are the libraries sluice is measured against and
// tested with, never depended on: each lives in a module of its own under
// interop/ (rsocket-go in interop/rsocket-go, the Redis clients and redcon
// in interop/redis), which `sluice bench rr` builds as a peer.
var competitorModules = []string{
	"github.com/redis/go-redis", // and its major versions, github.com/redis/go-redis/v9
	"github.com/redis/rueidis",
	"github.com/tidwall/redcon",
	"github.com/rsocket/rsocket-go",
}

// TestMainModuleRequiresNoCompetitor fails when a benchmark competitor
// or interop peer comes back into the main module's go.mod, directly or
// as an indirect requirement: a test or lab package that imported one
// would put it there (go mod tidy), and every user of the module would
// download it.
func TestMainModuleRequiresNoCompetitor(t *testing.T) {
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range requiredModules(string(b)) {
		for _, c := range competitorModules {
			if path == c || strings.HasPrefix(path, c+"/") {
				t.Errorf("go.mod requires %s: competitors belong in a module of their own under interop/ (see interop/redis)", path)
			}
		}
	}
}

// requiredModules lists the module paths of go.mod's require directives,
// in blocks or on single lines.
func requiredModules(gomod string) []string {
	var paths []string
	inBlock := false
	for _, line := range strings.Split(gomod, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "//"):
		case inBlock && f[0] == ")":
			inBlock = false
		case inBlock:
			paths = append(paths, f[0])
		case f[0] == "require" && len(f) >= 2 && f[1] == "(":
			inBlock = true
		case f[0] == "require" && len(f) >= 3:
			paths = append(paths, f[1])
		}
	}
	return paths
}
