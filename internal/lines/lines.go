// Package lines moves newline-separated records between a command's
// standard streams and the sluice client: `sluice produce` reads them from
// its input into the agent, `sluice consume` prints what the sink sends,
// one record per line.
package lines

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/export"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// Send sends in's lines to the agent through p, batchBytes per request,
// and returns how many non-empty lines it read (an empty line is no
// record: skipped). A failed request's error goes
// through failed with the lines sent before it (the caller adds what to
// check); progress, if not nil, is told the lines sent after each line
// read.
func Send(p *client.HTTPProducer, in io.Reader, batchBytes int, failed func(sent int, err error) error, progress func(sent int)) (int, error) {
	var sent, read int
	post := func(body []byte) error {
		if err := p.Produce(context.Background(), Split(body)...); err != nil {
			return failed(sent, err)
		}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var buf bytes.Buffer
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			// The agent keeps no empty record: not counted as sent
			// either, so the count matches what consume reads back
			// (before, `produce` said "6 lines spooled" for 3 records).
			continue
		}
		buf.Write(sc.Bytes())
		buf.WriteByte('\n')
		read++
		if buf.Len() >= batchBytes {
			if err := post(buf.Bytes()); err != nil {
				return read, err
			}
			sent = read
			buf.Reset()
		}
		if progress != nil {
			progress(sent)
		}
	}
	if err := sc.Err(); err != nil {
		return read, fmt.Errorf("reading input: %w", err)
	}
	if buf.Len() > 0 {
		if err := post(buf.Bytes()); err != nil {
			return read, err
		}
	}
	return read, nil
}

// Split returns the non-empty lines of body, aliasing it. The agent skips
// empty lines; the client refuses them.
func Split(body []byte) [][]byte {
	var recs [][]byte
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(line) > 0 {
			recs = append(recs, line)
		}
	}
	return recs
}

// Printed is what Print printed: records and bytes (without newlines)
// and the store offset of the last message (Any: there was one).
type Printed struct {
	Records, Bytes int64
	LastOffset     uint64
	Any            bool
}

// PrintOptions are Print's choices.
type PrintOptions struct {
	// Commit: commit after every message printed, once it is out of our
	// hands.
	Commit bool
	// Raw: print the records collectors sent (internal/telemetry's marked
	// records) as stored, not readably (see Record).
	Raw bool
}

// Print prints c's records on w, one per line (Record), until the end of
// the store (or, following, until ctx ends). An error reading from the
// sink goes through failed (not the end of the store, nor ctx ending).
func Print(ctx context.Context, c *client.Consumer, w io.Writer, o PrintOptions, failed func(error) error) (Printed, error) {
	out := bufio.NewWriterSize(w, 256<<10)
	var rerr error
	var p Printed
	var line []byte
	for {
		if c.Buffered() == 0 {
			// The next call may wait for the network: print what is here.
			if rerr = out.Flush(); rerr != nil {
				break
			}
		}
		b, err := c.NextBatch(ctx)
		if err != nil {
			if err != io.EOF && ctx.Err() == nil {
				rerr = failed(err)
			}
			break
		}
		for _, rec := range b.Records {
			if o.Raw {
				line = append(line[:0], rec...)
			} else {
				line = Record(line[:0], rec, b.Offset)
			}
			out.Write(line)
			out.WriteByte('\n')
			p.Bytes += int64(len(rec))
		}
		p.Records += int64(len(b.Records))
		p.LastOffset, p.Any = b.Offset, true
		if o.Commit {
			if rerr = out.Flush(); rerr != nil {
				break
			}
			c.CommitAsync()
		}
	}
	if err := out.Flush(); rerr == nil {
		rerr = err
	}
	return p, rerr
}

// Record appends rec as consume prints it to dst: a plain record as it
// is; a record a collector sent (internal/telemetry) readably, as
// export.Show renders it (an OTLP request as one line of JSON, a
// remote-write request as one exposition line per sample); a marked
// record that cannot be read as a comment line saying so, since its
// protobuf bytes would garble the output. off is the record's message
// offset, for that comment.
func Record(dst, rec []byte, off uint64) []byte {
	out, err := export.Show(dst, rec)
	switch {
	case err == nil:
		return out
	case errors.Is(err, telemetry.ErrNotMarked):
		return append(dst, rec...)
	}
	return fmt.Appendf(dst, "# sluice: unreadable record in the message at offset %d: %v", off, err)
}
