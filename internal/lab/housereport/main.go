// Command housereport prints the Go figures of issue 25's done-means for
// the tree it runs in: non-test lines of cmd/sluice, the top-level
// entries of internal/, and the longest file and function of every
// package. scripts/house-report.sh runs it and adds the duplicate pairs
// and the static-check findings, which need tools outside Go.
//
//	go run ./internal/lab/housereport [-root DIR]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/sluicehq/sluice/internal/lab/codesize"
)

func main() {
	root := flag.String("root", ".", "the module's root directory")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "housereport: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if err := report(os.Stdout, *root); err != nil {
		fmt.Fprintln(os.Stderr, "housereport:", err)
		os.Exit(1)
	}
}

func report(w io.Writer, root string) error {
	cmd, err := codesize.Measure(root, "cmd/sluice")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cmd/sluice: %d non-test lines in %d files; functions over 80 lines: %d\n", cmd.Lines(), len(cmd.Files), len(cmd.FuncsOver(80)))
	for _, f := range cmd.FuncsOver(80) {
		fmt.Fprintf(w, "  %s:%d %s %d lines\n", f.Path, f.Line, f.Name, f.Lines)
	}
	entries, err := os.ReadDir(filepath.Join(root, "internal"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "internal/: %d top-level entries:", len(entries))
	for _, e := range entries {
		fmt.Fprintf(w, " %s", e.Name())
	}
	fmt.Fprintln(w)
	return longestPerPackage(w, root)
}

// longestPerPackage prints a table: each package's non-test lines, its
// longest file and its longest function.
func longestPerPackage(w io.Writer, root string) error {
	dirs, err := codesize.PackageDirs(root)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "package\tlines\tlongest file\tlines\tlongest function\tlines")
	for _, dir := range dirs {
		pkg, err := codesize.Measure(root, dir)
		if err != nil {
			return err
		}
		file, fn := pkg.LongestFile(), pkg.LongestFunc()
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\n", dir, pkg.Lines(), filepath.Base(file.Path), file.Lines, fn.Name, fn.Lines)
	}
	return tw.Flush()
}
