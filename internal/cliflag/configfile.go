// Package cliflag is what sluice's flag sets share beyond package flag:
// size values (64MiB, 1000B), the did-you-mean of a mistyped flag name
// and flag errors reworded with it, and a daemon's --config file (YAML,
// flag name to value) applied to the flags its command line did not set.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/defaults"
)

// ValueError is a flag value's error that already says what the flag
// wants ("want a size such as 100B, 16KiB or 4MiB"), so Apply adds no
// hint of its own.
type ValueError struct{ Value, Want string }

func (e *ValueError) Error() string { return e.Want }

// Apply reads a YAML mapping of flag names to values from path
// and sets, in file order, each flag that the command line did not set.
// Scalars are passed to the flag as written (64MiB, 5s, true); a sequence
// is joined with commas, and only flags that take lists accept one.
// Unknown keys, repeated keys and values of the wrong shape or type are
// errors naming FILE:LINE.
func Apply(fs *flag.FlagSet, path, daemon string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			return nil // only comments
		}
		return fmt.Errorf("%s:%d: want a mapping of flag names to values (e.g. \"spool-quota: 64MiB\")", path, root.Line)
	}
	onCLI := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCLI[f.Name] = true })
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("%s:%d", path, k.Line)
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: a key must be a flag name", at)
		}
		name := k.Value
		if line, ok := seen[name]; ok {
			return fmt.Errorf("%s: key %q repeats the one on line %d", at, name, line)
		}
		seen[name] = k.Line
		f := fs.Lookup(name)
		if f == nil {
			if near := Nearest(fs, name); near != "" {
				return fmt.Errorf("%s: unknown key %q (did you mean %s?): not a flag of sluice %s (see sluice config defaults)", at, name, near, daemon)
			}
			return fmt.Errorf("%s: unknown key %q: not a flag of sluice %s (see sluice config defaults)", at, name, daemon)
		}
		if name == "config" {
			return fmt.Errorf("%s: key \"config\": a config file cannot name another", at)
		}
		value, err := configValue(v, daemon, name)
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, v.Line, name, err)
		}
		if onCLI[name] {
			continue // the command line wins
		}
		if err := fs.Set(name, value); err != nil {
			want := ""
			var bad *ValueError
			if e, ok := defaults.Lookup(daemon, name); ok && !errors.As(err, &bad) {
				want = fmt.Sprintf(" (want a %s, e.g. %q)", e.Kind(), e.Default())
			}
			return fmt.Errorf("%s:%d: %s: %q: %v%s", path, v.Line, name, value, err, want)
		}
	}
	return nil
}

// configValue turns the YAML value of flag name into the text the flag
// parses.
func configValue(v *yaml.Node, daemon, name string) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", errors.New("no value (write \"\" for an empty one)")
		}
		return v.Value, nil
	case yaml.SequenceNode:
		if e, _ := defaults.Lookup(daemon, name); !e.List {
			return "", errors.New("takes one value, not a list")
		}
		parts := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" || item.Value == "" {
				return "", fmt.Errorf("line %d: want a list of plain values", item.Line)
			}
			parts = append(parts, item.Value)
		}
		if len(parts) == 0 {
			return "", errors.New("empty list")
		}
		return strings.Join(parts, ","), nil
	case yaml.AliasNode:
		return "", errors.New("aliases are not supported")
	default:
		return "", errors.New("want a value, not a mapping")
	}
}

// Nearest returns the flag of fs closest to name by edit distance
// (a swap of two letters counts one), if it is close enough to be the
// one meant: at most 1 edit for names up to 4 letters, 2 beyond. A name
// of 3 letters or more that starts exactly one flag (--spool-q) names
// that flag first.
func Nearest(fs *flag.FlagSet, name string) string {
	best, bestD := "", 0
	var prefixed []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, name) {
			prefixed = append(prefixed, f.Name)
		}
		if d := editDistance(name, f.Name); best == "" || d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	})
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	switch {
	case len(prefixed) == 1 && len(name) >= 3:
		return prefixed[0]
	case best != "" && bestD <= limit:
		return best
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent letters.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
