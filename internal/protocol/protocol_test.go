package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestIsRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, true},
		{errors.New("connection reset"), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{Errorf(StatusUnavailable, "shutting down"), true},
		{Errorf(StatusResourceExhausted, "too many streams"), true},
		{Errorf(StatusPermissionDenied, "agent a claims b"), false},
		{Errorf(StatusUnauthenticated, "no token"), false},
		{Errorf(StatusInvalid, "bad frame"), false},
		{Errorf(StatusOutOfRange, "offset 9"), false},
		{fmt.Errorf("handshake: %w", Errorf(StatusPermissionDenied, "x")), false},
	} {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestErrorCodeRetryable(t *testing.T) {
	for c := CodeUnspecified; c <= CodeStoreUnavailable; c++ {
		want := c == CodeOverCredit || c == CodeStoreUnavailable
		if c.Retryable() != want {
			t.Errorf("%v.Retryable() = %v", c, c.Retryable())
		}
		if c.String() == "" {
			t.Errorf("code %d has no name", c)
		}
	}
}
