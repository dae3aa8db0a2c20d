package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// byteFieldFormatted is a structured log field named *_bytes whose value
// goes through a size formatter ("64 MiB"): a string where every other
// *_bytes field of the logs is a number, which a log query can sum and
// compare (found by hand, 2026-11-29: the agent's credit_bytes="64 MiB").
var byteFieldFormatted = regexp.MustCompile(`"[a-z_]*_bytes",\s*[A-Za-z.]*(?:humanBytes|FormatSize|formatSize|humanSize)\(`)

// TestLogByteFieldsAreNumbers: no *_bytes log field is a formatted size.
func TestLogByteFieldsAreNumbers(t *testing.T) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range byteFieldFormatted.FindAllIndex(b, -1) {
			line := 1 + strings.Count(string(b[:m[0]]), "\n")
			t.Errorf("%s:%d: %s: a *_bytes log field holds a formatted size; give the number (and the size in the message)", p, line, b[m[0]:m[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !byteFieldFormatted.MatchString(`"credit_bytes", humanBytes(cr.Bytes)`) {
		t.Fatal("the pattern no longer matches the case it was written for")
	}
}
