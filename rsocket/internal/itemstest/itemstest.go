// Package itemstest checks the streams rsocket's tests read: rsocket/echo
// answers a request stream of n with the items "0", "1", … "n-1", and
// whatever resumes, redials or restarts on the way, they must come
// complete, in order and without duplicates. It takes a stream as its
// next function and does not import package rsocket, so that package
// rsocket's own tests and rsocket/resumejournal's can both use it.
package itemstest

import (
	"errors"
	"fmt"
	"io"
	"strconv"
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
