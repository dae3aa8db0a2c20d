package s3store

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicehq/sluice/internal/xfer"
)

// ErrDenied is the object store refusing our credentials or this bucket:
// no retry fixes it until an operator does.
var ErrDenied = errors.New("object store: permission denied")

// ErrUnreachable is the object store not answering (connection refused,
// reset, timed out, 5xx after the client's own retries): the upload keeps
// what the store has, and a retry resumes once the store is back.
var ErrUnreachable = errors.New("object store unreachable")

// apiCode is the S3 error code of err ("" when it is not an S3 answer).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// httpStatus is the HTTP status of the S3 answer err (0: none).
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func notFound(err error) bool {
	switch apiCode(err) {
	case "NoSuchKey", "NotFound", "NoSuchUpload":
		return true
	}
	return httpStatus(err) == http.StatusNotFound
}

func preconditionFailed(err error) bool {
	return apiCode(err) == "PreconditionFailed" || httpStatus(err) == http.StatusPreconditionFailed
}

// classify names what the object store's failure means for the upload,
// as one of xfer's errors (so every transport answers it with its code)
// or ErrDenied / ErrUnreachable, with op and the store's own words.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	code, status := apiCode(err), httpStatus(err)
	switch {
	case code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
		code == "AllAccessDisabled" || status == http.StatusForbidden:
		return fmt.Errorf("%s: %w (%s): check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the bucket's policy", op, ErrDenied, code)
	case code == "NoSuchBucket":
		return fmt.Errorf("%s: %w: the bucket does not exist (%s)", op, ErrDenied, code)
	case code == "QuotaExceeded" || code == "StorageFull" || code == "XMinioStorageFull" ||
		code == "EntityTooLarge" || status == http.StatusInsufficientStorage:
		return fmt.Errorf("%s: %w: the object store is full (%s)", op, xfer.ErrNoSpace, code)
	case status == 0 || status >= 500 || isRetryExhausted(err):
		return fmt.Errorf("%s: %w: %v", op, ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isRetryExhausted(err error) bool {
	var me *retry.MaxAttemptsError
	return errors.As(err, &me) && httpStatus(err) == 0
}
