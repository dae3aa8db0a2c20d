// Package cli dispatches the command lines of a binary with
// subcommands ("sluice log check --repair DIR") to the commands
// registered with it, prints the help and the list of commands, and turns
// a command's error into output and an exit status. Each command parses
// its own flags.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Run is a command: it gets the arguments after its name.
type Run func(args []string, stdout, stderr io.Writer) error

// command is one subcommand.
type command struct {
	summary string
	run     Run
}

// App is a binary's commands.
type App struct {
	Name  string // the binary, "sluice"
	About string // the first line of the usage
	// commands maps "name" or "group name" to its command.
	commands map[string]command
}

// Register adds the command name ("group name" for a command of a
// group), listed with summary.
func (app *App) Register(name, summary string, run Run) {
	if app.commands == nil {
		app.commands = map[string]command{}
	}
	app.commands[name] = command{summary: summary, run: run}
}

// ExitCoder is an error with its own exit status; its message (if any)
// is printed after the command's name.
type ExitCoder interface {
	error
	ExitCode() int
}

// ExitInterrupted is the exit status of a command that a signal ended
// (its error is context.Canceled).
const ExitInterrupted = 130

// ErrUsage marks an error caused by how the binary was invoked (exit
// status 2).
var ErrUsage = errors.New("usage")

// Usagef is a usage error (exit 2, errors.Is ErrUsage) whose message is
// just the formatted text, without ErrUsage's own word.
func Usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// HelpError is what a command returns for -h: the usage text, which Main
// prints on stdout (help that was asked for is output, not an error). It
// matches flag.ErrHelp for errors.Is.
type HelpError struct{ Usage string }

func (e *HelpError) Error() string        { return "help requested" }
func (e *HelpError) Is(target error) bool { return target == flag.ErrHelp }

// Main runs the binary with args (without the program name) and returns
// the exit status: 0 success or help asked for, 1 failure, 2 bad
// invocation, ExitInterrupted when a signal ended the command.
func (app *App) Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// Nothing asked for: a usage mistake, as a missing subcommand is
		// (help that was asked for goes to stdout with 0).
		fmt.Fprintf(stderr, "%s: give a command\n\n", app.Name)
		app.usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			app.usage(stdout)
			return 0
		}
		return app.help(args[1:], stdout, stderr)
	case "--version", "-version":
		args = append([]string{"version"}, args[1:]...)
	}
	name, rest := app.lookup(args)
	if name == "" {
		return app.unknown(args, stderr)
	}
	return app.finish(name, app.commands[name].run(rest, stdout, stderr), stdout, stderr)
}

// finish turns a command's error into output and an exit status. It is
// the one place that puts "sluice NAME: " before a message; a message that
// starts with a word of the name already ("sink: mkdir ...", from the
// package doing the work) loses that word, so it does not read twice.
func (app *App) finish(name string, err error, stdout, stderr io.Writer) int {
	var ee ExitCoder
	var he *HelpError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &he):
		io.WriteString(stdout, he.Usage)
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, context.Canceled):
		// Interrupted (Ctrl-C, SIGTERM): what the user asked for, so no
		// message, but not a success either: the shell's 130 for SIGINT
		// tells a script the output may be incomplete.
		return ExitInterrupted
	case errors.As(err, &ee):
		if msg := ee.Error(); msg != "" {
			fmt.Fprintln(stderr, app.Name+" "+name+":", unprefixed(name, msg))
		}
		return ee.ExitCode()
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(stderr, app.Name+" "+name+":", unprefixed(name, err.Error()))
		return 2
	default:
		fmt.Fprintln(stderr, app.Name+" "+name+":", unprefixed(name, err.Error()))
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

// help prints the usage of the command named by args (`sluice help log
// check`), or the commands of a group (`sluice help bench`), on stdout.
func (app *App) help(args []string, stdout, stderr io.Writer) int {
	name, rest := app.lookup(args)
	if name == "" || len(rest) > 0 {
		if sub := app.group(args[0]); len(args) == 1 && len(sub) > 0 {
			fmt.Fprintf(stdout, "Commands of %q:\n", args[0])
			app.listCommands(stdout, sub)
			return 0
		}
		return app.unknown(args, stderr)
	}
	// Every command answers -h with its usage before doing anything else.
	return app.finish(name, app.commands[name].run([]string{"-h"}, stdout, stderr), stdout, stderr)
}

// unknown reports a command name that is not registered, then the list.
func (app *App) unknown(args []string, stderr io.Writer) int {
	if sub := app.group(args[0]); len(sub) > 0 && (len(args) == 1 || strings.HasPrefix(args[1], "-")) {
		fmt.Fprintf(stderr, "%s: %q needs a subcommand:\n", app.Name, args[0])
		app.listCommands(stderr, sub)
		return 2
	}
	name := args[0]
	if len(app.group(args[0])) > 0 && len(args) > 1 {
		name += " " + args[1]
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", app.Name, name)
	app.usage(stderr)
	return 2
}

// lookup finds the longest registered command name at the start of args.
func (app *App) lookup(args []string) (string, []string) {
	for n := min(2, len(args)); n > 0; n-- {
		name := strings.Join(args[:n], " ")
		if _, ok := app.commands[name]; ok {
			return name, args[n:]
		}
	}
	return "", args
}

// group returns the sorted commands "g X" of a command group g.
func (app *App) group(g string) []string {
	var names []string
	for n := range app.commands {
		if strings.HasPrefix(n, g+" ") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

func (app *App) usage(w io.Writer) {
	fmt.Fprintln(w, app.About)
	fmt.Fprintf(w, "\nUsage: %[1]s COMMAND [flags]   (%[1]s help COMMAND, or %[1]s COMMAND -h, for its flags)\n\nCommands:\n", app.Name)
	app.listCommands(w, app.Names())
}

// Names are every registered command's name, sorted.
func (app *App) Names() []string {
	names := make([]string, 0, len(app.commands))
	for n := range app.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (app *App) listCommands(w io.Writer, names []string) {
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, app.commands[n].summary)
	}
}
