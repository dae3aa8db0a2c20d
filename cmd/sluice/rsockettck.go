package main

import (
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/rsocket/tck"
)

func init() {
	register("rsocket tck", "test an RSocket server against the spec's MUST rules a client can observe", runRSocketTCK)
}

func runRSocketTCK(args []string, stdout, stderr io.Writer) error {
	ctx, cancel := signalContext()
	defer cancel()
	return rsocketTCK(ctx, args, stdout, stderr)
}

// rsocketTCK runs `sluice rsocket tck`: the conformance checks of package
// rsocket/tck against --url, a table on stdout, exit 1 on any failure.
func rsocketTCK(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rsocket tck", "--url tcp://HOST:PORT|tls://HOST:PORT|ws://HOST:PORT/PATH|wss://HOST:PORT/PATH [--json FILE] [--markdown] [--timeout D] [--quiet D] [--only ID,ID] [flags]", stderr)
	url := fs.String("url", "", "server URL: tcp://, tls://, ws:// or wss://")
	tlsc := cli.AddRSocketTLS(fs)
	jsonFile := fs.String("json", "", "also write the results as JSON to FILE")
	markdown := fs.Bool("markdown", false, "print a Markdown table instead of the aligned one")
	timeout := fs.Duration("timeout", 5*time.Second, "bound on each check")
	quiet := fs.Duration("quiet", 300*time.Millisecond, "how long to wait before concluding a frame does not come")
	only := fs.String("only", "", "comma-separated check ids to run (default all: "+strings.Join(tck.IDs(), ",")+")")
	dataMIME := fs.String("data-mime", "application/octet-stream", "data MIME type (SETUP)")
	metadataMIME := fs.String("metadata-mime", "application/octet-stream", "metadata MIME type (SETUP)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "url", *url); err != nil {
		return err
	}
	cfg := tck.Config{URL: *url, Timeout: *timeout, Quiet: *quiet, DataMIME: *dataMIME, MetadataMIME: *metadataMIME}
	if *only != "" {
		known := map[string]bool{}
		for _, id := range tck.IDs() {
			known[id] = true
		}
		for _, id := range strings.Split(*only, ",") {
			if !known[id] {
				return usageError(fs, "--only: unknown check %q", id)
			}
			cfg.Only = append(cfg.Only, id)
		}
	}
	if topt, err := tlsc.Option(*url); err != nil {
		return err
	} else if len(topt) > 0 {
		c, err := tlsc.Config()
		if err != nil {
			return err
		}
		cfg.TLS = c
	}
	rep := tck.Run(ctx, cfg)
	var err error
	if *markdown {
		err = rep.WriteMarkdown(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if *jsonFile != "" {
		f, err := os.Create(*jsonFile)
		if err != nil {
			return err
		}
		if err := rep.WriteJSON(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if rep.Failed() {
		return &exitError{code: 1}
	}
	return nil
}
