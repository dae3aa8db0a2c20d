package defaults

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes rs as aligned columns for a terminal (`sluice config
// defaults`): key, daemons, default (Shown) and meaning.
func WriteText(w io.Writer, rs []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tDAEMON\tDEFAULT\tMEANING")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, strings.Join(r.Daemons, ","), Shown(r.Default), r.Meaning)
	}
	return tw.Flush()
}

// Shown is a default as the text table prints it: "-" for an empty one,
// so that the columns stay aligned.
func Shown(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
