package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/defaults"
	"github.com/sluicehq/sluice/internal/lab/bench"
)

func init() {
	register("dict train", "train a zstd dictionary on sample records for agents (--dict)", runDictTrain)
}

func runDictTrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dict train", "--out FILE [--size 64KiB] [--message 16KiB] [INPUT ... | --records-from SINK] [flags]", stderr)
	out := fs.String("out", "", "where to write the dictionary")
	size := byteSize(64 << 10)
	fs.Var(&size, "size", "dictionary size")
	msg := byteSize(16 << 10)
	fs.Var(&msg, "message", "size of the sample messages (as large as the agent's messages will be)")
	recordsFrom := fs.String("records-from", "", "train on the records stored in the sink at this HOST:PORT instead of lines:\n"+
		"binary records such as Prometheus remote-write or OTLP requests, which INPUT's lines cannot hold")
	maxBytes := byteSize(64 << 20)
	fs.Var(&maxBytes, "max-bytes", "with --records-from: read at most this many bytes of records from the start of the store")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "out", *out); err != nil {
		return err
	}
	if *recordsFrom != "" && fs.NArg() > 0 {
		return usageError(fs, "INPUT and --records-from exclude each other")
	}
	samples, err := trainingSamples(fs.Args(), *recordsFrom, int64(maxBytes), int(msg))
	if err != nil {
		return err
	}
	// Hold back every tenth sample to measure the gain honestly.
	var train, test [][]byte
	for i, s := range samples {
		if i%10 == 9 {
			test = append(test, s)
		} else {
			train = append(train, s)
		}
	}
	d, err := codec.Train(train, int(size))
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, d.Data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dictionary %d (%s) trained on %s of ≤ %s, written to %s\n",
		d.ID, defaults.Plural(len(d.Data), "byte"), defaults.Plural(len(train), "sample message"), bench.SizeName(int(msg)), *out)
	if len(test) > 0 {
		zstd, dict, err := bench.CompareDictionary(d, test)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "on %d held-out messages: zstd %.2fx, zstd+dictionary %.2fx (%.2fx better)\n",
			len(test), zstd, dict, dict/zstd)
	}
	return nil
}

// trainingSamples are the sample messages to train on: the lines of the
// named files (or stdin), or with sink != "" the records stored in that
// sink, packed into messages of messageBytes as the agent packs them.
func trainingSamples(names []string, sink string, maxBytes int64, messageBytes int) ([][]byte, error) {
	if sink != "" {
		recs, err := storedRecords(sink, maxBytes)
		if err != nil {
			return nil, err
		}
		return batch.PackSamples(recs, messageBytes)
	}
	inputs := []io.Reader{os.Stdin}
	if len(names) > 0 {
		inputs = nil
		for _, name := range names {
			f, err := os.Open(name)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			inputs = append(inputs, f)
		}
	}
	return batch.Samples(inputs, messageBytes)
}

// storedRecords reads the sink's store from its start until its end or
// maxBytes of records.
func storedRecords(sink string, maxBytes int64) ([][]byte, error) {
	c, err := client.NewConsumer(client.SinkAddrs(sink))
	if err != nil {
		return nil, &exitError{code: 2, msg: err.Error()}
	}
	defer c.Close()
	ctx, stop := signalContext()
	defer stop()
	recs, err := c.ReadStored(ctx, maxBytes)
	if err != nil {
		return nil, cli.DialHint(err, "sink", sink, "--records-from", "the sink's --listen address")
	}
	return recs, nil
}
