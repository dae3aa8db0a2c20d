package metricsgen

import (
	"bufio"
	"io"
)

// Limit is where Write stops: once Bytes have been written (counting
// newlines and message separators), or with ByRecords after Records
// lines; at the end of a line or, with Messages, of a message, so it may
// run over by one.
type Limit struct {
	Bytes     int64
	ByRecords bool
	Records   int64
	Messages  bool // group lines into messages, separated by an empty line
}

// Write writes g's samples to w, one per line, until lim (`sluice gen
// metrics`).
func (g *Generator) Write(w io.Writer, lim Limit) error {
	var written, lines int64
	done := func() bool {
		if lim.ByRecords {
			return lines >= lim.Records
		}
		return written >= lim.Bytes
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	write := func(p []byte) error {
		n, err := bw.Write(p)
		written += int64(n)
		return err
	}
	var line []byte
	if !lim.Messages {
		for !done() {
			line = append(g.AppendRecord(line[:0]), '\n')
			if err := write(line); err != nil {
				return err
			}
			lines++
		}
		return bw.Flush()
	}
	var msg [][]byte
	for first := true; !done(); first = false {
		if !first {
			if err := write([]byte{'\n'}); err != nil {
				return err
			}
		}
		msg = g.NextMessage(msg)
		for _, r := range msg {
			line = append(append(line[:0], r...), '\n')
			if err := write(line); err != nil {
				return err
			}
			lines++
		}
	}
	return bw.Flush()
}
