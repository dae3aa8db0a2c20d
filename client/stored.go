package client

import (
	"context"
	"io"
)

// ReadStored reads records from c's position until the end of the store
// (c without Follow) or until it holds maxBytes of records or more (it
// stops after the message that reaches it). Each record is a copy: what
// `sluice dict train --records-from` trains a dictionary on.
func (c *Consumer) ReadStored(ctx context.Context, maxBytes int64) ([][]byte, error) {
	var recs [][]byte
	var n int64
	for n < maxBytes {
		b, err := c.NextBatch(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return recs, err
		}
		for _, r := range b.Records {
			recs = append(recs, append([]byte(nil), r...))
			n += int64(len(r))
		}
	}
	return recs, nil
}
