package xfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tusSender is a tus 1.0.0 client. tus has no lookup by name, so, like
// other tus clients, it remembers the upload URL under a fingerprint of
// (server, file, size, mtime, name) in StateDir; a send that was killed
// finds it there and resumes.
type tusSender struct {
	base  *url.URL
	c     *http.Client
	state string // file holding the upload URL
	url   string // the upload URL, once known
}

func newTUSSender(to, fp string, o *SendOptions) (*tusSender, error) {
	base, err := url.Parse(to)
	if err != nil {
		return nil, err
	}
	dir := o.StateDir
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no directory for tus upload URLs (set --state or XDG_CACHE_HOME): %w", err)
		}
		dir = filepath.Join(cache, "sluice", "xfer")
	}
	key := sha256.Sum256([]byte(strings.Join([]string{to, fp, o.Name}, "\x00")))
	return &tusSender{base: base, c: &http.Client{}, state: filepath.Join(dir, hex.EncodeToString(key[:16])+".url")}, nil
}

func (t *tusSender) Close() error { t.c.CloseIdleConnections(); return nil }

// httpError turns an answer that is not the expected one into an error,
// a *RemoteError when the body has one of our codes.
func httpError(resp *http.Response, what string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	if ourMessage(msg) {
		return decodeRemote(msg)
	}
	code := CodeInternal
	switch resp.StatusCode {
	case http.StatusConflict:
		code = CodeOffset
	case StatusChecksumMismatch:
		code = CodeChecksum
	case http.StatusNotFound, http.StatusGone:
		code = CodeNotFound
	case http.StatusRequestEntityTooLarge:
		code = CodeTooLarge
	case http.StatusInsufficientStorage:
		code = CodeNoSpace
	case http.StatusLocked:
		code = CodeBusy
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed:
		// Credentials or an endpoint that is not tus's: no retry helps.
		return &permanentError{fmt.Errorf("server: %s: %s %s", what, resp.Status, msg)}
	case http.StatusBadRequest, http.StatusPreconditionFailed, http.StatusUnsupportedMediaType:
		return &RemoteError{Code: CodeBadName, Msg: fmt.Sprintf("%s: %s %s", what, resp.Status, msg)}
	}
	return &RemoteError{Code: code, Msg: fmt.Sprintf("%s: %s %s", what, resp.Status, msg)}
}

func (t *tusSender) do(ctx context.Context, method, u string, body io.Reader, n int64, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Tus-Resumable", TUSVersion)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.ContentLength = n
	}
	return t.c.Do(req)
}

func (t *tusSender) offset(ctx context.Context, name string) (int64, int64, bool, error) {
	b, err := os.ReadFile(t.state)
	if err != nil {
		return 0, 0, false, nil
	}
	t.url = strings.TrimSpace(string(b))
	resp, err := t.do(ctx, http.MethodHead, t.url, nil, 0, nil)
	if err != nil {
		return 0, 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone {
		t.forget()
		return 0, 0, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false, httpError(resp, "HEAD")
	}
	off, err1 := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	size, err2 := strconv.ParseInt(resp.Header.Get("Upload-Length"), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, fmt.Errorf("HEAD %s: no Upload-Offset or Upload-Length", t.url)
	}
	return off, size, true, nil
}

func (t *tusSender) forget() {
	t.url = ""
	os.Remove(t.state)
}

// create makes a new upload; the file's SHA-256 goes in the metadata so
// the server verifies the whole file before it renames it into place.
func (t *tusSender) create(ctx context.Context, j *job) error {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(j.src, 0, j.size)); err != nil {
		return &permanentError{err}
	}
	b64 := base64.StdEncoding.EncodeToString
	meta := "filename " + b64([]byte(j.name)) + ",sha256 " + b64([]byte(hex.EncodeToString(h.Sum(nil))))
	resp, err := t.do(ctx, http.MethodPost, t.base.String(), nil, 0, map[string]string{
		"Upload-Length": strconv.FormatInt(j.size, 10), "Upload-Metadata": meta})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// No tus endpoint at this URL (not a vanished upload, which
		// PATCH and HEAD see): the same answer every time.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return &permanentError{fmt.Errorf("server: POST %s: %s %s: no tus endpoint there; `sluice xfer serve` takes uploads at http://HOST:PORT/files/",
			t.base, resp.Status, strings.TrimSpace(string(b)))}
	}
	if resp.StatusCode != http.StatusCreated {
		return httpError(resp, "POST")
	}
	loc, err := t.base.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return fmt.Errorf("POST: bad Location %q", resp.Header.Get("Location"))
	}
	t.url = loc.String()
	if err := os.MkdirAll(filepath.Dir(t.state), 0o700); err == nil {
		os.WriteFile(t.state, []byte(t.url+"\n"), 0o600)
	}
	return nil
}

func (t *tusSender) send(ctx context.Context, j *job) ([]byte, error) {
	if j.from == 0 {
		t.forget()
		if err := t.create(ctx, j); err != nil {
			return nil, err
		}
	}
	var serverSum string
	if j.size == 0 {
		t.forget()
		return j.sum(), nil
	}
	err := j.chunks(func(off int64, p []byte, crc uint32) error {
		cs := sha256.Sum256(p)
		if j.flipped { // the checksum is of the bytes before the test's bit flip
			p[0] ^= 1
			cs = sha256.Sum256(p)
			p[0] ^= 1
		}
		resp, err := t.do(ctx, http.MethodPatch, t.url, bytes.NewReader(p), int64(len(p)), map[string]string{
			"Content-Type":    "application/offset+octet-stream",
			"Upload-Offset":   strconv.FormatInt(off, 10),
			"Upload-Checksum": "sha256 " + base64.StdEncoding.EncodeToString(cs[:]),
		})
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			err := httpError(resp, "PATCH")
			if errors.Is(err, ErrNotFound) {
				t.forget()
			}
			return err
		}
		if got := resp.Header.Get("Upload-Offset"); got != strconv.FormatInt(off+int64(len(p)), 10) {
			return fmt.Errorf("PATCH: server at offset %s, want %d", got, off+int64(len(p)))
		}
		serverSum = resp.Header.Get(headerSHA256)
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.forget()
	if serverSum == "" {
		return j.sum(), nil // a server that is not sluice: tus has no whole-file hash
	}
	return hex.DecodeString(serverSum)
}
