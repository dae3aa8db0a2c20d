// Command sluice moves messages between services fast and without loss.
// It is one binary with subcommands; run `sluice help` for the list.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
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

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	name, rest := lookup(args)
	if name == "" {
		usage(stderr)
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			return 0
		}
		return 2
	}
	err := commands[name].run(rest, stdout, stderr)
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(stderr, "sluice "+name+":", ee.msg)
		}
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "sluice "+name+":", err)
		return 2
	default:
		fmt.Fprintln(stderr, "sluice "+name+":", err)
		return 1
	}
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

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice moves messages between services fast and without loss.")
	fmt.Fprintln(w, "\nUsage: sluice COMMAND [flags]   (sluice COMMAND -h for the flags)\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
}

// newFlags returns a FlagSet that reports errors instead of exiting.
func newFlags(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sluice %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2}
	}
	return nil
}
