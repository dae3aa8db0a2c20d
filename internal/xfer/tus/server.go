// Package tus is file transfer over tus 1.0.0: its server adapter over an
// xfer.IDBackend (uploads addressed by id), and its client for the upload
// loop of internal/xfer/send.
package tus

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/idleread"
	"github.com/sluicehq/sluice/internal/xfer"
)

// tus 1.0.0 (https://tus.io/protocols/resumable-upload) with the creation,
// checksum, termination and expiration extensions, and concatenation over
// a store that joins uploads (concat.go).
const (
	Version       = "1.0.0"
	tusExtensions = "creation,checksum,termination,expiration"
	// tusAlgorithms are the Upload-Checksum algorithms a PATCH may use.
	// crc32c (Castagnoli, the 4 bytes big endian) is ours, not in the tus
	// registry: sluice's client uses it when a server lists it, since a
	// PATCH's SHA-256 on both ends (the client's, the server's check)
	// cost as much CPU as the rest of the upload (docs/xfer.md).
	tusAlgorithms = "sha1,sha256,md5,crc32c"
	// algorithmsHeader lists tusAlgorithms; tus puts it on the OPTIONS
	// answer, sluice on every answer, so that a client learns them from
	// the POST or HEAD it sends anyway, without an OPTIONS round trip.
	algorithmsHeader = "Tus-Checksum-Algorithm"
	// StatusChecksumMismatch is tus's 460 Checksum Mismatch.
	StatusChecksumMismatch = 460
	// headerSHA256 carries the file's SHA-256 (hex) on the PATCH answer
	// that completed the upload; an addition of ours that tus clients
	// ignore.
	headerSHA256 = "Sluice-Sha256"
)

// Handler serves a backend as a tus 1.0.0 server whose upload URLs are
// base + ID; base must end in "/" (e.g. "/files/"). tus needs uploads
// addressed by id, and kept once finished: an xfer.IDBackend.
func Handler(s xfer.IDBackend, base string) http.Handler {
	return &tusServer{s: s, base: base}
}

type tusServer struct {
	s    xfer.IDBackend
	base string
}

func (t *tusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Tus-Resumable", Version)
	h.Set(algorithmsHeader, tusAlgorithms)
	if r.Method == http.MethodOptions {
		h.Set("Tus-Version", Version)
		ext := tusExtensions
		if _, ok := t.s.(xfer.ConcatBackend); ok {
			ext += ",concatenation"
		}
		h.Set("Tus-Extension", ext)
		if m := t.s.MaxSize(); m > 0 {
			h.Set("Tus-Max-Size", strconv.FormatInt(m, 10))
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if v := r.Header.Get("Tus-Resumable"); v != Version {
		h.Set("Tus-Version", Version)
		tusError(w, http.StatusPreconditionFailed, fmt.Sprintf("Tus-Resumable %q is not supported, want %s", v, Version))
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, t.base)
	if !ok && r.URL.Path+"/" == t.base {
		rest, ok = "", true
	}
	if !ok || strings.Contains(rest, "/") {
		tusError(w, http.StatusNotFound, "not found")
		return
	}
	switch {
	case rest == "" && r.Method == http.MethodPost:
		t.create(w, r)
	case rest != "" && r.Method == http.MethodHead:
		t.head(w, r, rest)
	case rest != "" && r.Method == http.MethodPatch:
		t.patch(w, r, rest)
	case rest != "" && r.Method == http.MethodDelete:
		t.delete(w, r, rest)
	default:
		tusError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed here")
	}
}

func tusError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

// tusStatus is the HTTP answer to a store error; the body carries the
// wire code so our client recovers it.
func tusStatus(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch xfer.CodeOf(err) {
	case xfer.CodeBadName, xfer.CodeOverSize:
		code = http.StatusBadRequest
		if errors.Is(err, xfer.ErrOverSize) {
			code = http.StatusRequestEntityTooLarge
		}
	case xfer.CodeTooLarge:
		code = http.StatusRequestEntityTooLarge
	case xfer.CodeNoSpace:
		code = http.StatusInsufficientStorage
	case xfer.CodeOffset:
		code = http.StatusConflict
	case xfer.CodeChecksum:
		code = StatusChecksumMismatch
	case xfer.CodeNotFound:
		code = http.StatusNotFound
	case xfer.CodeBusy:
		code = http.StatusLocked // tus-js-client retries a 423
	}
	tusError(w, code, xfer.EncodeRemote(err))
}

func (t *tusServer) expires(w http.ResponseWriter, in xfer.Info) {
	if !in.Expires.IsZero() {
		w.Header().Set("Upload-Expires", in.Expires.UTC().Format(http.TimeFormat))
	}
}

// parseMetadata parses Upload-Metadata: comma-separated "key base64"
// pairs, where a key may stand alone (an empty value). tuspy sends the
// header empty when there is no metadata.
func parseMetadata(s string) (map[string]string, error) {
	m := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		k, v, _ := strings.Cut(kv, " ")
		if k == "" || strings.ContainsAny(k, " ,") {
			return nil, fmt.Errorf("bad Upload-Metadata pair %q", kv)
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("Upload-Metadata %s: bad base64", k)
		}
		if _, dup := m[k]; dup {
			// tus 1.0.0: "All keys MUST be unique" (before, the last won).
			return nil, fmt.Errorf("Upload-Metadata: key %s given twice", k)
		}
		m[k] = string(b)
	}
	return m, nil
}

// metadata is the file name and expected SHA-256 (nil: none) that
// Upload-Metadata raw gives, refused (answered) when malformed.
func (t *tusServer) metadata(w http.ResponseWriter, raw string) (string, []byte, bool) {
	meta, err := parseMetadata(raw)
	if err != nil {
		tusError(w, http.StatusBadRequest, err.Error())
		return "", nil, false
	}
	var sha []byte
	if v := meta["sha256"]; v != "" {
		if sha, err = hex.DecodeString(v); err != nil || len(sha) != 32 {
			tusError(w, http.StatusBadRequest, "Upload-Metadata sha256 must be 64 hex digits")
			return "", nil, false
		}
	}
	return meta["filename"], sha, true
}

func (t *tusServer) create(w http.ResponseWriter, r *http.Request) {
	if t.createConcat(w, r) {
		return
	}
	size, ok := t.uploadLength(w, r)
	if !ok {
		return
	}
	raw := r.Header.Get("Upload-Metadata")
	name, sha, ok := t.metadata(w, raw)
	if !ok {
		return
	}
	u, err := t.s.BeginKept(name, size, sha, raw, true)
	if err != nil {
		if errors.Is(err, xfer.ErrBusy) {
			tusError(w, http.StatusConflict, xfer.EncodeRemote(err))
			return
		}
		tusStatus(w, err)
		return
	}
	defer u.Release()
	t.created(w, u, size)
}

// created answers the creation of u (finishing it at once when it is
// empty, as it will get no PATCH): 201 with its Location and expiry.
func (t *tusServer) created(w http.ResponseWriter, u xfer.BackendUpload, size int64) {
	in := u.Info()
	if size == 0 {
		if _, err := u.Finish(nil, "tus"); err != nil {
			tusStatus(w, err)
			return
		}
	}
	w.Header().Set("Location", t.base+in.ID)
	t.expires(w, in)
	w.WriteHeader(http.StatusCreated)
}

func (t *tusServer) head(w http.ResponseWriter, r *http.Request, id string) {
	w.Header().Set("Cache-Control", "no-store")
	in, err := t.s.StatID(id)
	if err != nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if !in.Finished && !in.Active && in.Size > 0 && in.Offset == in.Size && len(in.Parts) == 0 {
		// Every byte arrived but the upload did not land: its Finish
		// failed (the name taken by a directory, the hash differed) or
		// the server stopped before it. Upload-Offset = Upload-Length
		// tells any tus client the upload is done, so land it now, or
		// answer why not (found by hand, 2026-11-29: sluice's own client
		// printed the hash and exited 0 for a file that never landed).
		if in, err = t.finishFull(r, id); err != nil {
			tusStatus(w, err)
			return
		}
	}
	h := w.Header()
	h.Set("Upload-Offset", strconv.FormatInt(in.Offset, 10))
	h.Set("Upload-Length", strconv.FormatInt(in.Size, 10))
	if in.Meta != "" {
		h.Set("Upload-Metadata", in.Meta)
	}
	if in.Finished {
		h.Set(headerSHA256, hex.EncodeToString(in.SHA256))
	}
	t.concatHeaders(h, in)
	t.expires(w, in)
	w.WriteHeader(http.StatusOK)
}

// finishFull finishes the upload id, whose bytes all arrived (head), and
// describes it again.
func (t *tusServer) finishFull(r *http.Request, id string) (xfer.Info, error) {
	u, err := t.s.Acquire(r.Context(), id)
	if err != nil {
		return xfer.Info{}, err
	}
	in := u.Info()
	if u.Offset() == in.Size {
		_, err = u.Finish(nil, "tus")
	}
	u.Release()
	if err != nil {
		return xfer.Info{}, err
	}
	return t.s.StatID(id)
}

// finishedPatch answers a PATCH to a finished upload as tus 1.0.0 says
// for any upload: at an offset other than its length, 409 Conflict
// without change; at its length with an empty body, 204 with
// Upload-Offset (nothing to apply); with bytes, 413, as they exceed
// Upload-Length. False when id is not a finished upload.
func (t *tusServer) finishedPatch(w http.ResponseWriter, r *http.Request, id string, off int64) bool {
	in, err := t.s.StatID(id)
	if err != nil || !in.Finished {
		return false
	}
	if len(in.Parts) > 0 {
		tusError(w, http.StatusForbidden, "a final upload (Upload-Concat: final) is complete from its creation: it takes no PATCH")
		return true
	}
	if off != in.Size {
		tusStatus(w, &xfer.OffsetError{Want: off, Have: in.Size})
		return true
	}
	if r.ContentLength > 0 || r.ContentLength < 0 && readsAny(r.Body) {
		tusStatus(w, fmt.Errorf("%w: the upload is complete (%d bytes)", xfer.ErrOverSize, in.Size))
		return true
	}
	w.Header().Set("Upload-Offset", strconv.FormatInt(in.Size, 10))
	w.Header().Set(headerSHA256, hex.EncodeToString(in.SHA256))
	t.expires(w, in)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// readsAny tells whether a body of unknown length has a byte.
func readsAny(body io.Reader) bool {
	var b [1]byte
	n, _ := io.ReadFull(body, b[:])
	return n > 0
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func tusHash(algo string) hash.Hash {
	switch algo {
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	case "md5":
		return md5.New()
	case "crc32c":
		return crc32.New(castagnoli)
	}
	return nil
}

func (t *tusServer) patch(w http.ResponseWriter, r *http.Request, id string) {
	if ct := r.Header.Get("Content-Type"); ct != "application/offset+octet-stream" {
		tusError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/offset+octet-stream")
		return
	}
	off, err := parseNonNegative(r.Header.Get("Upload-Offset"))
	if err != nil {
		tusError(w, http.StatusBadRequest, "Upload-Offset must be a non-negative integer")
		return
	}
	var sum hash.Hash
	var want []byte
	if c := r.Header.Get("Upload-Checksum"); c != "" {
		algo, b64, _ := strings.Cut(c, " ")
		if sum = tusHash(algo); sum == nil {
			tusError(w, http.StatusBadRequest, fmt.Sprintf("checksum algorithm %q is not supported (%s)", algo, tusAlgorithms))
			return
		}
		if want, err = base64.StdEncoding.DecodeString(b64); err != nil || len(want) != sum.Size() {
			tusError(w, http.StatusBadRequest, "Upload-Checksum: bad base64 digest")
			return
		}
	}
	u, err := t.s.Acquire(r.Context(), id)
	if errors.Is(err, xfer.ErrNotFound) && t.finishedPatch(w, r, id, off) {
		return
	}
	if err != nil {
		tusStatus(w, err)
		return
	}
	defer u.Release()
	body := idleread.New(w, r, t.s.IdleTimeout())
	u.OnTakeover(func() { body.Interrupt(errTakeover) })
	in := u.Info()
	if off != u.Offset() {
		tusStatus(w, &xfer.OffsetError{Want: off, Have: u.Offset()})
		return
	}
	if r.ContentLength > in.Size-off {
		tusStatus(w, fmt.Errorf("%w: %d bytes at offset %d, the size is %d", xfer.ErrOverSize, r.ContentLength, off, in.Size))
		return
	}
	n, err := u.ReadFrom(off, body, sum, want)
	if stopped := body.Stopped(); err != nil && stopped != nil {
		// The body stalled, or a newer request took the upload over:
		// what arrived is kept (and durable); the client, if it is still
		// there, asks for the offset again. (Stopped after the whole
		// body was read, the PATCH goes on as usual.)
		if errors.Is(stopped, idleread.ErrIdle) {
			t.s.Counters().IdleTimeouts.Add(1)
		}
		w.Header().Set("Upload-Offset", strconv.FormatInt(n, 10))
		tusError(w, http.StatusRequestTimeout, stopped.Error())
		return
	}
	if err != nil && n <= off {
		tusStatus(w, err)
		return
	}
	if err != nil {
		// The body broke off; what arrived is kept (and durable).
		w.Header().Set("Upload-Offset", strconv.FormatInt(n, 10))
		tusError(w, http.StatusBadRequest, "body ended early: "+err.Error())
		return
	}
	if n == in.Size {
		s, err := u.Finish(nil, "tus")
		if err != nil {
			tusStatus(w, err)
			return
		}
		w.Header().Set(headerSHA256, hex.EncodeToString(s))
	}
	w.Header().Set("Upload-Offset", strconv.FormatInt(n, 10))
	t.expires(w, u.Info())
	w.WriteHeader(http.StatusNoContent)
}

func (t *tusServer) delete(w http.ResponseWriter, r *http.Request, id string) {
	u, err := t.s.Acquire(r.Context(), id)
	if errors.Is(err, xfer.ErrNotFound) && t.s.RemoveFinished(id) {
		// A finished upload: its record goes (HEAD, PATCH and DELETE
		// answer 404 from now on); the file it landed stays.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		tusStatus(w, err)
		return
	}
	u.Remove()
	u.Release()
	w.WriteHeader(http.StatusNoContent)
}

// errTakeover stops a PATCH whose upload a newer request took over.
var errTakeover = errors.New("a newer request for this upload took it over")

// parseNonNegative parses a header tus defines as a non-negative integer:
// decimal digits only (strconv.ParseInt also takes a sign: "+5" was an
// offset of 5).
func parseNonNegative(v string) (int64, error) {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return strconv.ParseInt(v, 10, 64)
}
