package tus

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/internal/xfer"
)

// The concatenation extension: a client creates partial uploads
// (Upload-Concat: partial), sends them in parallel, then creates the final
// upload (Upload-Concat: final;URL1 URL2 …, no Upload-Length), whose bytes
// are the partials' in that order. The server answers the final POST once
// the file is there: the final upload is complete from its creation, so a
// PATCH to it is refused (403, as the extension says) and the partials it
// used are gone (404). Offered only over a store that joins uploads
// (xfer.ConcatBackend): the S3 store, not the disk store.

// maxConcatParts bounds the partial uploads of one final upload; a header
// naming more is refused before the store is asked about any.
const maxConcatParts = 1000

// concatKind is what an Upload-Concat header asks for.
type concatKind int

const (
	concatNone concatKind = iota
	concatPartial
	concatFinal
)

// parseConcat parses Upload-Concat: "partial", or "final;" and the
// space-separated URLs of partial uploads, returned as the ids they name
// under base (absolute URLs or paths).
func parseConcat(v, base string) (concatKind, []string, error) {
	switch {
	case v == "":
		return concatNone, nil, nil
	case v == "partial":
		return concatPartial, nil, nil
	}
	list, ok := strings.CutPrefix(v, "final;")
	if !ok {
		return 0, nil, fmt.Errorf("Upload-Concat %q: want partial or final;URL…", v)
	}
	urls := strings.Fields(list)
	if len(urls) == 0 || len(urls) > maxConcatParts {
		return 0, nil, fmt.Errorf("Upload-Concat final names %d uploads, want 1 to %d", len(urls), maxConcatParts)
	}
	ids := make([]string, len(urls))
	for i, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return 0, nil, fmt.Errorf("Upload-Concat: bad URL %q", s)
		}
		id, ok := strings.CutPrefix(u.Path, base)
		if !ok || id == "" || strings.Contains(id, "/") {
			return 0, nil, fmt.Errorf("Upload-Concat: %q is not an upload of this server (%s…)", s, base)
		}
		ids[i] = id
	}
	return concatFinal, ids, nil
}

// createConcat answers a POST with Upload-Concat; false when it has none.
func (t *tusServer) createConcat(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get("Upload-Concat")
	if v == "" {
		return false
	}
	cb, ok := t.s.(xfer.ConcatBackend)
	if !ok {
		tusError(w, http.StatusBadRequest, "Upload-Concat is not supported (concatenation is not an extension of this server's store)")
		return true
	}
	kind, ids, err := parseConcat(v, t.base)
	if err != nil {
		tusError(w, http.StatusBadRequest, err.Error())
		return true
	}
	if kind == concatPartial {
		t.createPartial(w, r, cb)
		return true
	}
	t.createFinal(w, r, cb, ids)
	return true
}

func (t *tusServer) createPartial(w http.ResponseWriter, r *http.Request, cb xfer.ConcatBackend) {
	size, ok := t.uploadLength(w, r)
	if !ok {
		return
	}
	raw := r.Header.Get("Upload-Metadata")
	if _, err := parseMetadata(raw); err != nil {
		tusError(w, http.StatusBadRequest, err.Error())
		return
	}
	u, err := cb.BeginPartial(size, raw)
	if err != nil {
		tusStatus(w, err)
		return
	}
	defer u.Release()
	t.created(w, u, size)
}

// createFinal makes the final upload of the partials ids. Its length is
// theirs: the client must not send one.
func (t *tusServer) createFinal(w http.ResponseWriter, r *http.Request, cb xfer.ConcatBackend, ids []string) {
	if r.Header.Get("Upload-Length") != "" {
		tusError(w, http.StatusBadRequest, "Upload-Length must not be sent with Upload-Concat: final (the length is the partial uploads')")
		return
	}
	raw := r.Header.Get("Upload-Metadata")
	name, sha, ok := t.metadata(w, raw)
	if !ok {
		return
	}
	in, err := cb.Concat(name, sha, raw, ids)
	switch {
	case errors.Is(err, xfer.ErrNotPartial):
		tusError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, xfer.ErrBusy):
		tusError(w, http.StatusConflict, xfer.EncodeRemote(err))
		return
	case err != nil:
		tusStatus(w, err)
		return
	}
	w.Header().Set("Location", t.base+in.ID)
	w.Header().Set(headerSHA256, fmt.Sprintf("%x", in.SHA256))
	t.expires(w, in)
	w.WriteHeader(http.StatusCreated)
}

// concatHeaders adds HEAD's Upload-Concat of a partial or final upload.
func (t *tusServer) concatHeaders(h http.Header, in xfer.Info) {
	switch {
	case in.Partial:
		h.Set("Upload-Concat", "partial")
	case len(in.Parts) > 0:
		urls := make([]string, len(in.Parts))
		for i, id := range in.Parts {
			urls[i] = t.base + id
		}
		h.Set("Upload-Concat", "final;"+strings.Join(urls, " "))
	}
}

// uploadLength is the POST's Upload-Length, refused (answered) when it is
// not a size this server takes.
func (t *tusServer) uploadLength(w http.ResponseWriter, r *http.Request) (int64, bool) {
	if r.Header.Get("Upload-Defer-Length") != "" {
		tusError(w, http.StatusBadRequest, "Upload-Defer-Length is not supported (creation-defer-length is not an extension of this server)")
		return 0, false
	}
	size, err := parseNonNegative(r.Header.Get("Upload-Length"))
	if err != nil {
		tusError(w, http.StatusBadRequest, "Upload-Length must be a non-negative integer")
		return 0, false
	}
	if m := t.s.MaxSize(); m > 0 && size > m {
		tusStatus(w, fmt.Errorf("%w: %d bytes, the limit is %d", xfer.ErrTooLarge, size, m))
		return 0, false
	}
	return size, true
}
