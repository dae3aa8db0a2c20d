package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/internal/codec"
	"github.com/sluicehq/sluice/internal/lab/bench"
)

func init() {
	register("dict train", "train a zstd dictionary on sample records for agents (--dict)", runDictTrain)
}

func runDictTrain(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dict train", "--out FILE [--size 64KiB] [--message 16KiB] [INPUT ...]", stderr)
	out := fs.String("out", "", "where to write the dictionary")
	size := byteSize(64 << 10)
	fs.Var(&size, "size", "dictionary size")
	msg := byteSize(16 << 10)
	fs.Var(&msg, "message", "size of the sample messages (as large as the agent's messages will be)")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if err := requireFlags(fs, "out", *out); err != nil {
		return err
	}
	inputs := []io.Reader{os.Stdin}
	if fs.NArg() > 0 {
		inputs = nil
		for _, name := range fs.Args() {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			inputs = append(inputs, f)
		}
	}
	samples, err := batch.Samples(inputs, int(msg))
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
		d.ID, plural(len(d.Data), "byte"), plural(len(train), "sample message"), bench.SizeName(int(msg)), *out)
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
