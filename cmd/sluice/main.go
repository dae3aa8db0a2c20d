// Command sluice moves messages between services fast and without loss.
// It is one binary with subcommands; run `sluice help` for the list.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/cliflag"
	"github.com/sluicehq/sluice/internal/lab/bench"
	"github.com/sluicehq/sluice/internal/lab/benchkit"
)

// app is sluice's commands; each file registers its own.
var app = &cli.App{Name: "sluice", About: "sluice moves messages between services fast and without loss."}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	app.Register(name, summary, run)
}

// exitError carries a specific exit status with its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

func main() {
	stopProfile, err := startEnvCPUProfile()
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice: %s: %v\n", bench.SinkCPUProfileEnv, err)
		os.Exit(1)
	}
	code := runMain(os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	os.Exit(code)
}

// startEnvCPUProfile profiles the whole process to the file that the
// environment variable bench.SinkCPUProfileEnv names, if set: how `bench
// wan --sink-cpuprofile` profiles its sink, a child process. It is read
// in main, not runMain, so that tests calling runMain never profile.
func startEnvCPUProfile() (stop func(), err error) {
	return benchkit.StartCPUProfile(os.Getenv(bench.SinkCPUProfileEnv))
}

// runMain runs sluice with args (without the program name) and returns the
// exit status: 0 success or help asked for, 1 failure, 2 bad invocation.
func runMain(args []string, stdout, stderr io.Writer) int { return app.Main(args, stdout, stderr) }

// newFlags returns a FlagSet that reports errors instead of exiting. Its
// usage goes to the FlagSet's output: stderr, except while parseFlags
// captures it for -h.
func newFlags(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sluice %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses the flags of a command that takes no positional
// arguments: anything left over is a usage error (exit 2), so a typo such
// as `sluice agent sink=x` does not start a daemon with defaults.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected argument %q: this command takes only flags", fs.Arg(0))
	}
	return nil
}

// parseFlagsArgs parses the flags of a command that takes positional
// arguments (fs.Args()). On -h it returns a *helpError holding the usage
// text, for runMain to print on stdout. A bad flag is a usage error that
// names it (with a did-you-mean for a flag the command lacks) and points
// at the help, instead of the flag package's line and the whole usage.
func parseFlagsArgs(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &cli.HelpError{Usage: buf.String()}
	default:
		return usageError(fs, "%s", cliflag.Message(fs, err))
	}
}

// usageError is a usage mistake in the command whose flags are fs (exit
// 2): the message, then one line pointing at the command's help. Several
// lines of usage would scroll the message away.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...) + "\n" + helpLine(fs)}
}

// helpLine points at the help of the command whose flags are fs.
func helpLine(fs *flag.FlagSet) string {
	return fmt.Sprintf("Run 'sluice help %s' for its flags.", strings.TrimPrefix(fs.Name(), "sluice "))
}

// requireFlags returns the usage error naming the required flags left
// empty, given as name, value pairs (the value after flags and config
// file), or nil when every one is set.
func requireFlags(fs *flag.FlagSet, nameValues ...string) error {
	var missing []string
	for i := 0; i+1 < len(nameValues); i += 2 {
		if nameValues[i+1] == "" {
			missing = append(missing, "--"+nameValues[i])
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return usageError(fs, "%s is required", missing[0])
	default:
		return usageError(fs, "%s and %s are required", strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])
	}
}
