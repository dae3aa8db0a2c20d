package s3store

import (
	"errors"
	"net"
	"strings"
	"testing"

	smithy "github.com/aws/smithy-go"

	"github.com/sluicehq/sluice/internal/xfer"
)

// What the object store answers becomes an error that says what it means
// for the upload, with the wire code a client acts on: a full bucket is
// no_space (xfer send gives up, saying so), refused credentials are a
// permission error, a store that does not answer is retryable.
func TestClassifyStoreErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		is   error
		code xfer.Code
		says string
	}{
		{&smithy.GenericAPIError{Code: "QuotaExceeded", Message: "bucket quota"}, xfer.ErrNoSpace, xfer.CodeNoSpace, "full"},
		{&smithy.GenericAPIError{Code: "XMinioStorageFull"}, xfer.ErrNoSpace, xfer.CodeNoSpace, "full"},
		{&smithy.GenericAPIError{Code: "AccessDenied"}, ErrDenied, xfer.CodeInternal, "permission denied"},
		{&smithy.GenericAPIError{Code: "NoSuchBucket"}, ErrDenied, xfer.CodeInternal, "does not exist"},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, ErrUnreachable, xfer.CodeInternal, "unreachable"},
	} {
		got := classify("sending part 3", c.err)
		if !errors.Is(got, c.is) || xfer.CodeOf(got) != c.code || !strings.Contains(got.Error(), c.says) ||
			!strings.Contains(got.Error(), "sending part 3") {
			t.Errorf("classify(%v) = %v (code %s); want %v, code %s, saying %q", c.err, got, xfer.CodeOf(got), c.is, c.code, c.says)
		}
	}
	if !xfer.Retryable(&xfer.RemoteError{Code: xfer.CodeOf(classify("x", &net.OpError{Op: "dial", Err: errors.New("refused")}))}) {
		t.Error("an unreachable store is not retryable for the client")
	}
	if xfer.Retryable(&xfer.RemoteError{Code: xfer.CodeNoSpace}) {
		t.Error("a full store is retryable for the client")
	}
}
