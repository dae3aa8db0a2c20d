// Package resumetest is what the resumption tests of package rsocket and
// of rsocket/resumejournal share: the check that a stream of the items
// "0", "1", … "n-1" (rsocket/echo's answer to a request stream of n)
// came complete, in order and without duplicates whatever resumed,
// redialled or restarted on the way, a thief that presents another
// client's resume token, the mutual-TLS PKI of an owner and a thief
// (mtls.go), and the bound on a step that must not hang. It does not
// import package rsocket (it takes a stream as its next function), so
// that package rsocket's own tests can use it.
package resumetest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/rsocket/frame"
)

// Ordered reads a stream of "0", "1", … in parts.
type Ordered struct {
	// Next returns the stream's next item; io.EOF at its end.
	Next func() ([]byte, error)
	// Got is the next item expected: how many came.
	Got int
}

// Read reads up to item upTo (excluded): an error is the stream's end
// (io.EOF), its failure, or an item out of order.
func (r *Ordered) Read(upTo int) error {
	for r.Got < upTo {
		data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return err
		}
		if err != nil {
			return fmt.Errorf("item %d: %w", r.Got, err)
		}
		if got := string(data); got != strconv.Itoa(r.Got) {
			return fmt.Errorf("item %d is %q: lost, reordered or duplicated", r.Got, got)
		}
		r.Got++
	}
	return nil
}

// ReadAll reads a stream of "0".."n-1" and checks it is complete, in
// order and without duplicates.
func ReadAll(next func() ([]byte, error), n int) error {
	r := Ordered{Next: next}
	err := r.Read(n + 1)
	switch {
	case errors.Is(err, io.EOF) && r.Got == n:
		return nil
	case errors.Is(err, io.EOF):
		return fmt.Errorf("stream ended after %d of %d items", r.Got, n)
	case err == nil:
		return fmt.Errorf("stream goes on after %d items", n)
	}
	return err
}

// ThiefResumes presents token in a RESUME over TLS with cfg's client
// certificate, and fails the test unless the server refuses it as
// coming from another client identity within wait.
func ThiefResumes(t *testing.T, addr string, cfg *tls.Config, token []byte, wait time.Duration) {
	t.Helper()
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	out := frame.ReserveLengthPrefix(nil)
	if out, err = frame.AppendResume(out, 1, 0, token, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := frame.SetLengthPrefix(out, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(out); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	in, err := frame.ReadLengthPrefixed(nc, nil, 1<<20)
	if err != nil {
		t.Fatalf("thief's RESUME: no answer: %v", err)
	}
	ef, err := frame.ParseError(in)
	if err != nil || ef.Code != frame.ErrorCodeRejectedResume || ef.Message() != "resume from another client identity" {
		t.Fatalf("thief's RESUME answered %+v (%v); want REJECTED_RESUME \"resume from another client identity\"", ef, err)
	}
}

// Within fails the test when f does not return within bound, generous
// (a hang is a failure, not a timing assertion).
func Within(t testing.TB, what string, bound time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("%s: no outcome after %v", what, bound)
	}
}
