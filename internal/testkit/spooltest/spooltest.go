// Package spooltest stands in for the agent's spool in the tests of what
// feeds it (the collectors' HTTP receivers and their OTLP/gRPC one): a
// Recorder keeps what was ingested, or refuses it with the error a test
// chose. Those tests had a fakeSpool each.
package spooltest

import (
	"bytes"
	"context"
	"sync"
)

// Recorder records what the receivers spool, or fails with the error
// given to Fail.
type Recorder struct {
	mu      sync.Mutex
	records [][]byte
	err     error
}

// Ingest is the spool's ingest function (collect.Config.Ingest): it
// keeps a copy of records, or returns the error given to Fail.
func (r *Recorder) Ingest(_ context.Context, records [][]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	for _, rec := range records {
		r.records = append(r.records, bytes.Clone(rec))
	}
	return nil
}

// Taken is every record ingested so far, in order.
func (r *Recorder) Taken() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records
}

// Fail makes every later Ingest return err (nil: accept again).
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}
