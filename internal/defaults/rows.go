package defaults

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Row is one flag as `sluice config defaults --json` prints it.
type Row struct {
	Key     string   `json:"key"`
	Daemons []string `json:"daemons"`
	Type    string   `json:"type"`
	Default string   `json:"default"`
	// Value is the default in base units: bytes for sizes, seconds for
	// durations.
	Value   any    `json:"value"`
	Meaning string `json:"meaning"`
}

// Rows are the flags of daemon ("": every flag), in table order.
func Rows(daemon string) []Row {
	var out []Row
	for _, e := range Table {
		if daemon != "" && !e.Of(daemon) {
			continue
		}
		v := e.Value
		switch x := v.(type) {
		case time.Duration:
			v = x.Seconds()
		case Size:
			v = int64(x)
		}
		out = append(out, Row{Key: e.Flag, Daemons: e.Daemons, Type: e.Kind(), Default: e.Default(), Value: v, Meaning: e.Meaning})
	}
	return out
}

// Markdown is rs as the Markdown table of docs/configuration.md.
func Markdown(rs []Row) string {
	var b bytes.Buffer
	b.WriteString("| key | daemon | default | meaning |\n|---|---|---|---|\n")
	for _, r := range rs {
		def := "-"
		if r.Default != "" {
			def = "`" + r.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Key, strings.Join(r.Daemons, ", "), def, strings.ReplaceAll(r.Meaning, "|", `\|`))
	}
	return b.String()
}
