package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/defaults"
)

func init() {
	register("config defaults", "print every flag of agent and sink with its default and meaning", runConfigDefaults)
}

// flagDefs registers flags of a daemon with the defaults of
// internal/defaults, so no flag registration spells a default out. A flag
// missing from the table gets the zero value; TestFlagDefaultsFromTable
// catches that.
type flagDefs struct {
	fs     *flag.FlagSet
	daemon string
}

func (d flagDefs) value(name string) any {
	e, _ := defaults.Lookup(d.daemon, name)
	return e.Value
}

func (d flagDefs) String(p *string, name, usage string) {
	v, _ := d.value(name).(string)
	d.fs.StringVar(p, name, v, usage)
}

func (d flagDefs) Bool(p *bool, name, usage string) {
	v, _ := d.value(name).(bool)
	d.fs.BoolVar(p, name, v, usage)
}

func (d flagDefs) Int(p *int, name, usage string) {
	v, _ := d.value(name).(int)
	d.fs.IntVar(p, name, v, usage)
}

func (d flagDefs) Duration(p *time.Duration, name, usage string) {
	v, _ := d.value(name).(time.Duration)
	d.fs.DurationVar(p, name, v, usage)
}

func (d flagDefs) Size(p *byteSize, name, usage string) {
	v, _ := d.value(name).(defaults.Size)
	*p = byteSize(v)
	d.fs.Var(p, name, usage)
}

// configFlag registers --config, the YAML file of a daemon's flags.
func (d flagDefs) configFlag(p *string) {
	d.String(p, "config", "read flags from this YAML `FILE` of \"flag-name: value\" lines (lists as YAML sequences);\n"+
		"flags on the command line override it; unknown keys are errors")
}

// parseDaemonFlags parses a daemon's command line, then fills the flags
// it did not set from the --config file, if one is given.
func parseDaemonFlags(fs *flag.FlagSet, args []string, configFile *string, daemon string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *configFile == "" {
		return nil
	}
	if err := applyConfigFile(fs, *configFile, daemon); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	return nil
}

// applyConfigFile reads a YAML mapping of flag names to values from path
// and sets, in file order, each flag that the command line did not set.
// Scalars are passed to the flag as written (64MiB, 5s, true); a sequence
// is joined with commas, and only flags that take lists accept one.
// Unknown keys, repeated keys and values of the wrong shape or type are
// errors naming FILE:LINE.
func applyConfigFile(fs *flag.FlagSet, path, daemon string) error {
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
			if near := nearestFlag(fs, name); near != "" {
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
			var bad *badValueError
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

// configRow is one line of `sluice config defaults --json`.
type configRow struct {
	Key     string   `json:"key"`
	Daemons []string `json:"daemons"`
	Type    string   `json:"type"`
	Default string   `json:"default"`
	// Value is the default in base units: bytes for sizes, seconds for
	// durations.
	Value   any    `json:"value"`
	Meaning string `json:"meaning"`
}

func rows(daemon string) []configRow {
	var out []configRow
	for _, e := range defaults.Table {
		if daemon != "" && !e.Of(daemon) {
			continue
		}
		v := e.Value
		switch x := v.(type) {
		case time.Duration:
			v = x.Seconds()
		case defaults.Size:
			v = int64(x)
		}
		out = append(out, configRow{Key: e.Flag, Daemons: e.Daemons, Type: e.Kind(), Default: e.Default(), Value: v, Meaning: e.Meaning})
	}
	return out
}

func runConfigDefaults(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("config defaults", "[--json] [--markdown] [--daemon agent|sink]", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array of {key, daemons, type, default, value, meaning}; value is in bytes or seconds")
	markdown := fs.Bool("markdown", false, "print a Markdown table (the one in docs/configuration.md)")
	daemon := fs.String("daemon", "", "only the flags of this daemon: agent or sink")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *daemon != "" && *daemon != defaults.Agent && *daemon != defaults.Sink {
		return &exitError{code: 2, msg: fmt.Sprintf("--daemon %q: want agent or sink", *daemon)}
	}
	rs := rows(*daemon)
	switch {
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	case *markdown:
		_, err := io.WriteString(stdout, markdownTable(rs))
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tDAEMON\tDEFAULT\tMEANING")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, strings.Join(r.Daemons, ","), shown(r.Default), r.Meaning)
	}
	return tw.Flush()
}

// shown prints an empty default as "-", so columns stay aligned.
func shown(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func markdownTable(rs []configRow) string {
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
