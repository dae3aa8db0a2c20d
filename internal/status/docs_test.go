package status

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSnapshotDocumented: the Snapshot example in docs/status.md names
// every JSON field of the Go types, and every key it gives a value is one
// of them, so the documented API cannot drift from the code.
func TestSnapshotDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "### Snapshot\n\n```jsonc\n")
	if start < 0 {
		t.Fatal("docs/status.md has no \"### Snapshot\" jsonc block")
	}
	block := doc[start:]
	block = block[:strings.Index(block[len("### Snapshot\n\n```jsonc\n"):], "```")+len("### Snapshot\n\n```jsonc\n")]

	fields := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || ty == reflect.TypeOf(time.Time{}) {
			return
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = true
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Snapshot{}))
	for name := range fields {
		if !strings.Contains(block, `"`+name+`"`) {
			t.Errorf("docs/status.md's Snapshot does not mention %q", name)
		}
	}
	for _, m := range regexp.MustCompile(`"(\w+)":`).FindAllStringSubmatch(block, -1) {
		if !fields[m[1]] {
			t.Errorf("docs/status.md's Snapshot has %q, which no Snapshot type has", m[1])
		}
	}
}
