// Package post is the plain HTTP upload of a whole file in one POST body,
// without resume: its server adapter over an xfer.Backend and its client.
package post

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/idleread"
	"github.com/sluicehq/sluice/internal/xfer"
)

// Handler takes a whole file as one POST body at /post/NAME (with a
// Content-Length) into the backend: the same writes, SHA-256, fsyncs and
// rename as an upload, without resume. It is the plain-HTTP baseline of
// `sluice bench upload` (HTTP/1.1 and h2c) and `sluice xfer serve --http`;
// it answers the SHA-256 in hex. A body that sends nothing for the store's
// IdleTimeout ends the request (408), and the partial upload is removed.
func Handler(s xfer.Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/post/")
		if !ok || r.Method != http.MethodPost {
			http.Error(w, "POST /post/NAME", http.StatusNotFound)
			return
		}
		if r.ContentLength < 0 {
			http.Error(w, "Content-Length required", http.StatusLengthRequired)
			return
		}
		u, err := s.Begin(name, r.ContentLength, nil, "", true)
		if err != nil {
			http.Error(w, xfer.EncodeRemote(err), status(err, http.StatusBadRequest))
			return
		}
		defer u.Release()
		body := idleread.New(w, r, s.IdleTimeout())
		if n, err := u.ReadFrom(0, body, nil, nil); err != nil || n != r.ContentLength {
			u.Remove()
			if errors.Is(body.Stopped(), idleread.ErrIdle) {
				s.Counters().IdleTimeouts.Add(1)
				http.Error(w, fmt.Sprintf("body: %d of %d bytes: %v", n, r.ContentLength, body.Stopped()), http.StatusRequestTimeout)
				return
			}
			http.Error(w, fmt.Sprintf("body: %d of %d bytes: %v", n, r.ContentLength, err), http.StatusBadRequest)
			return
		}
		sum, err := u.Finish(nil, "http")
		if err != nil {
			// No resume over a POST: the partial is of no use (before,
			// it stayed until --expire).
			u.Remove()
			http.Error(w, xfer.EncodeRemote(err), status(err, http.StatusInternalServerError))
			return
		}
		fmt.Fprintln(w, hex.EncodeToString(sum))
	})
}

// status is the HTTP answer to a store error, as tus answers the same
// ones (a busy name 409, too large 413, no space 507); other errors get
// otherwise. Before, every refusal of Begin was a 400.
func status(err error, otherwise int) int {
	switch xfer.CodeOf(err) {
	case xfer.CodeBusy:
		return http.StatusConflict
	case xfer.CodeTooLarge, xfer.CodeOverSize:
		return http.StatusRequestEntityTooLarge
	case xfer.CodeNoSpace:
		return http.StatusInsufficientStorage
	case xfer.CodeBadName:
		return http.StatusBadRequest
	}
	return otherwise
}
