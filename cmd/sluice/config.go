package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/cliflag"
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
	if err := cliflag.Apply(fs, *configFile, daemon); err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	return nil
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
	rs := defaults.Rows(*daemon)
	switch {
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	case *markdown:
		_, err := io.WriteString(stdout, defaults.Markdown(rs))
		return err
	}
	return defaults.WriteText(stdout, rs)
}
