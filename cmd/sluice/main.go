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
	"regexp"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/flagfile"
)

// command is one subcommand. run gets the arguments after its name.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

// commands maps "name" or "group name" to its command.
var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	commands[name] = command{summary: summary, run: run}
}

// errUsage marks an error caused by how sluice was invoked (exit status 2).
var errUsage = errors.New("usage")

// exitError carries a specific exit status with its message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// helpError is what parseFlags returns for -h: the usage text, which runMain
// prints on stdout (help that was asked for is output, not an error). It
// matches flag.ErrHelp for errors.Is.
type helpError struct{ usage string }

func (e *helpError) Error() string        { return "help requested" }
func (e *helpError) Is(target error) bool { return target == flag.ErrHelp }

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain runs sluice with args (without the program name) and returns the
// exit status: 0 success or help asked for, 1 failure, 2 bad invocation.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		return help(args[1:], stdout, stderr)
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	name, rest := lookup(args)
	if name == "" {
		return unknown(args, stderr)
	}
	return finish(name, commands[name].run(rest, stdout, stderr), stdout, stderr)
}

// finish turns a command's error into output and an exit status. It is
// the one place that puts "sluice NAME: " before a message; a message that
// starts with a word of the name already ("sink: mkdir ...", from the
// package doing the work) loses that word, so it does not read twice.
func finish(name string, err error, stdout, stderr io.Writer) int {
	var ee *exitError
	var he *helpError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &he):
		io.WriteString(stdout, he.usage)
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(stderr, "sluice "+name+":", unprefixed(name, ee.msg))
		}
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "sluice "+name+":", unprefixed(name, err.Error()))
		return 2
	default:
		fmt.Fprintln(stderr, "sluice "+name+":", unprefixed(name, err.Error()))
		return 1
	}
}

// unprefixed drops from msg a leading "WORD: " where WORD is the command
// name or one of its words (sink, log, xfer), repeatedly.
func unprefixed(name, msg string) string {
	for again := true; again; {
		again = false
		for _, w := range append([]string{name}, strings.Fields(name)...) {
			if rest, ok := strings.CutPrefix(msg, w+": "); ok {
				msg, again = rest, true
			}
		}
	}
	return msg
}

// integer is any integer type plural counts.
type integer interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// plural says n of a noun: "1 segment", "2 segments", "0 problems"; the
// plural is noun+"s" unless given.
func plural[N integer](n N, noun string, nouns ...string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	if len(nouns) > 0 {
		return fmt.Sprintf("%d %s", n, nouns[0])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// help prints the usage of the command named by args (`sluice help log
// check`), or the commands of a group (`sluice help bench`), on stdout.
func help(args []string, stdout, stderr io.Writer) int {
	name, rest := lookup(args)
	if name == "" || len(rest) > 0 {
		if sub := group(args[0]); len(args) == 1 && len(sub) > 0 {
			fmt.Fprintf(stdout, "Commands of %q:\n", args[0])
			listCommands(stdout, sub)
			return 0
		}
		return unknown(args, stderr)
	}
	// Every command answers -h with its usage before doing anything else.
	return finish(name, commands[name].run([]string{"-h"}, stdout, stderr), stdout, stderr)
}

// unknown reports a command name that is not registered, then the list.
func unknown(args []string, stderr io.Writer) int {
	if sub := group(args[0]); len(sub) > 0 && (len(args) == 1 || strings.HasPrefix(args[1], "-")) {
		fmt.Fprintf(stderr, "sluice: %q needs a subcommand:\n", args[0])
		listCommands(stderr, sub)
		return 2
	}
	name := args[0]
	if len(group(args[0])) > 0 && len(args) > 1 {
		name += " " + args[1]
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

// lookup finds the longest registered command name at the start of args.
func lookup(args []string) (string, []string) {
	for n := min(2, len(args)); n > 0; n-- {
		name := strings.Join(args[:n], " ")
		if _, ok := commands[name]; ok {
			return name, args[n:]
		}
	}
	return "", args
}

// group returns the sorted commands "g X" of a command group g.
func group(g string) []string {
	var names []string
	for n := range commands {
		if strings.HasPrefix(n, g+" ") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice moves messages between services fast and without loss.")
	fmt.Fprintln(w, "\nUsage: sluice COMMAND [flags]   (sluice help COMMAND, or sluice COMMAND -h, for its flags)\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	listCommands(w, names)
}

func listCommands(w io.Writer, names []string) {
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
}

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
		return &helpError{usage: buf.String()}
	default:
		return usageError(fs, "%s", flagMessage(fs, err))
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

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	reNoValue   = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
	reBadValue  = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]*): (.*)$`)
)

// flagMessage rewords an error of fs.Parse: flags spelled --name as in
// the docs, and an unknown flag with the nearest of fs's flags.
func flagMessage(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		if near := flagfile.Nearest(fs, m[1]); near != "" {
			return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", m[1], near)
		}
		return fmt.Sprintf("unknown flag --%s", m[1])
	}
	if m := reNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value", m[1])
	}
	if m := reBadValue.FindStringSubmatch(msg); m != nil {
		why := m[3]
		if f := fs.Lookup(m[2]); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				why = "want true or false"
			}
		}
		return fmt.Sprintf("--%s %s: %s", m[2], m[1], why)
	}
	return msg
}
