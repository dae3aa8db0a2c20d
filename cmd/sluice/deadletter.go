package main

import (
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/agent/spool"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
)

func init() {
	register("dead-letter list", "print the messages an agent set aside because the sink refused them for good (--records: their records)", deadLetterList)
	register("dead-letter clear", "remove an agent's dead-letter log, once its messages were sent again (the agent stopped)", deadLetterClear)
}

func deadLetterClear(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dead-letter clear", "SPOOL", stderr)
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError(fs, "give one SPOOL: the agent's --spool directory")
	}
	n, damaged, err := spool.ClearDeadLetters(fs.Arg(0))
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	fmt.Fprintln(stdout, spool.ClearedLine(n, damaged))
	return nil
}

func deadLetterList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dead-letter list", "[--records] [--dict FILE] SPOOL", stderr)
	records := fs.Bool("records", false, "print the messages' records, one per line (what sluice produce reads), instead of one line per message")
	dictFile := fs.String("dict", "", "the agent's --dict `FILE`, to decode messages compressed with it")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError(fs, "give one SPOOL: the agent's --spool directory")
	}
	dec := codec.NewDecoder(defaults.MaxMessage)
	if *dictFile != "" {
		d, err := codec.ReadDictionaryFile(*dictFile)
		if err == nil {
			err = dec.AddDictionary(d)
		}
		if err != nil {
			return &exitError{code: 1, msg: "--dict: " + err.Error()}
		}
	}
	letters, unreadable, err := spool.PrintDeadLetters(stdout, stderr, fs.Arg(0), *records, dec)
	switch {
	case err != nil:
		return &exitError{code: 1, msg: err.Error()}
	case unreadable > 0:
		return &exitError{code: 1, msg: fmt.Sprintf("%s of %d could not be read", defaults.Plural(unreadable, "message"), letters)}
	case letters == 0:
		fmt.Fprintln(stderr, "no dead letters")
	}
	return nil
}
