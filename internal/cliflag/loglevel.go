package cliflag

import (
	"flag"

	"github.com/sluicehq/sluice/internal/logutil"
)

// logLevelValue is a --log-level flag: Set refuses what
// logutil.CheckLevel refuses, so that a mistyped level is a flag error
// (exit 2), on the command line and in a config file, instead of a
// daemon logging at info without a word.
type logLevelValue struct{ p *string }

func (v logLevelValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v logLevelValue) Set(s string) error {
	if err := logutil.CheckLevel(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// LogLevelVar defines the log-level flag name on fs, default def.
func LogLevelVar(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Var(logLevelValue{p}, name, usage)
}

// LogLevel is fs.String for a --log-level (LogLevelVar).
func LogLevel(fs *flag.FlagSet, def, usage string) *string {
	p := new(string)
	LogLevelVar(fs, p, "log-level", def, usage)
	return p
}
