package tus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
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

	"github.com/sluicehq/sluice/internal/xfer"
)

// Client is a tus 1.0.0 client of the upload loop (an xfer.Transport).
// tus has no lookup by name, so, like other tus clients, it remembers the
// upload URL under a fingerprint of (server, file, size, mtime, name) in
// a state directory; a send that was killed finds it there and resumes.
type Client struct {
	base  *url.URL
	c     *http.Client
	state string // file holding the upload URL
	url   string // the upload URL, once known
	// crc32c: the server's last answer listed crc32c among its checksum
	// algorithms, so a PATCH carries the CRC32C the upload loop computed
	// for the chunk anyway instead of a SHA-256 of it (see checksum).
	crc32c bool
	// finishedSum: the SHA-256 (hex) a HEAD answered for a finished
	// upload (Offset), which the server verified and landed.
	finishedSum string
}

// NewClient makes a client of the tus endpoint at `to`
// (http://HOST:PORT/files/) for the file fingerprinted fp uploaded as
// name, keeping upload URLs in stateDir (default
// ~/.cache/sluice/xfer).
func NewClient(to, fp, name, stateDir string) (*Client, error) {
	base, err := url.Parse(to)
	if err != nil {
		return nil, err
	}
	dir := stateDir
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no directory for tus upload URLs (set --state or XDG_CACHE_HOME): %w", err)
		}
		dir = filepath.Join(cache, "sluice", "xfer")
	}
	key := sha256.Sum256([]byte(strings.Join([]string{to, fp, name}, "\x00")))
	return &Client{base: base, c: &http.Client{}, state: filepath.Join(dir, hex.EncodeToString(key[:16])+".url")}, nil
}

// Close closes the idle connections.
func (t *Client) Close() error { t.c.CloseIdleConnections(); return nil }

// Reset does nothing: every request finds a connection of its own.
func (t *Client) Reset() {}

// httpError turns an answer that is not the expected one into an error,
// a *xfer.RemoteError when the body has one of our codes.
func httpError(resp *http.Response, what string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	if xfer.OurMessage(msg) {
		return xfer.DecodeRemote(msg)
	}
	code := xfer.CodeInternal
	switch resp.StatusCode {
	case http.StatusConflict:
		code = xfer.CodeOffset
	case StatusChecksumMismatch:
		code = xfer.CodeChecksum
	case http.StatusNotFound, http.StatusGone:
		code = xfer.CodeNotFound
	case http.StatusRequestEntityTooLarge:
		code = xfer.CodeTooLarge
	case http.StatusInsufficientStorage:
		code = xfer.CodeNoSpace
	case http.StatusLocked:
		code = xfer.CodeBusy
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed:
		// Credentials or an endpoint that is not tus's: no retry helps.
		return xfer.Permanent(fmt.Errorf("server: %s: %s %s", what, resp.Status, msg))
	case http.StatusBadRequest, http.StatusPreconditionFailed, http.StatusUnsupportedMediaType:
		return &xfer.RemoteError{Code: xfer.CodeBadName, Msg: fmt.Sprintf("%s: %s %s", what, resp.Status, msg)}
	}
	return &xfer.RemoteError{Code: code, Msg: fmt.Sprintf("%s: %s %s", what, resp.Status, msg)}
}

func (t *Client) do(ctx context.Context, method, u string, body io.Reader, n int64, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Tus-Resumable", Version)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.ContentLength = n
	}
	resp, err := t.c.Do(req)
	if err == nil {
		t.crc32c = listsAlgorithm(resp.Header.Get(algorithmsHeader), "crc32c")
	}
	return resp, err
}

// listsAlgorithm tells whether list (a Tus-Checksum-Algorithm value,
// comma-separated) has algo.
func listsAlgorithm(list, algo string) bool {
	for a := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(a) == algo {
			return true
		}
	}
	return false
}

// checksum is the Upload-Checksum of c's PATCH. The PATCH's checksum
// only has to catch bytes changed on the way (the whole file's SHA-256,
// checked before the rename, is what vouches for the file): CRC32C does
// that, and the loop computed it already, where SHA-256 would cost a pass
// on each end, about 0.7 CPU-seconds per GB each here (docs/xfer.md).
// SHA-256 for a server that does not list crc32c (any other tus server).
func (t *Client) checksum(c xfer.Chunk) string {
	if t.crc32c {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], c.CRC32C)
		return "crc32c " + base64.StdEncoding.EncodeToString(b[:])
	}
	cs := sha256.Sum256(c.Orig) // of the bytes before a test's bit flip
	return "sha256 " + base64.StdEncoding.EncodeToString(cs[:])
}

// Offset asks the server the offset of the upload URL remembered for
// this file (none: not exists).
func (t *Client) Offset(ctx context.Context, name string) (int64, int64, bool, error) {
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
	t.finishedSum = resp.Header.Get(headerSHA256)
	off, err1 := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	size, err2 := strconv.ParseInt(resp.Header.Get("Upload-Length"), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, fmt.Errorf("HEAD %s: no Upload-Offset or Upload-Length", t.url)
	}
	return off, size, true, nil
}

func (t *Client) forget() {
	t.url = ""
	os.Remove(t.state)
}

// create makes a new upload; the file's SHA-256 goes in the metadata so
// the server verifies the whole file before it renames it into place.
func (t *Client) create(ctx context.Context, out xfer.Outgoing) error {
	sum, err := out.SHA256()
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	meta := "filename " + b64([]byte(out.Name)) + ",sha256 " + b64([]byte(hex.EncodeToString(sum)))
	resp, err := t.do(ctx, http.MethodPost, t.base.String(), nil, 0, map[string]string{
		"Upload-Length": strconv.FormatInt(out.Size, 10), "Upload-Metadata": meta})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		// No tus endpoint at this URL (not a vanished upload, which
		// PATCH and HEAD see): the same answer every time.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return xfer.Permanent(fmt.Errorf("server: POST %s: %s %s: no tus endpoint there; `sluice xfer serve` takes uploads at http://HOST:PORT/files/",
			t.base, resp.Status, strings.TrimSpace(string(b))))
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

// Begin creates the upload when it starts from zero (a remembered one
// that was not resumed is forgotten); else PATCHes continue the
// remembered one.
func (t *Client) Begin(ctx context.Context, out xfer.Outgoing) (xfer.Stream, error) {
	if out.From == 0 {
		t.forget()
		if err := t.create(ctx, out); err != nil {
			return nil, err
		}
	}
	return &upload{t: t, ctx: ctx, size: out.Size}, nil
}

// upload is one upload's PATCHes, one per chunk.
type upload struct {
	t         *Client
	ctx       context.Context
	size      int64
	serverSum string // the SHA-256 the completing PATCH answered
}

func (u *upload) Chunk(c xfer.Chunk) error {
	t := u.t
	resp, err := t.do(u.ctx, http.MethodPatch, t.url, bytes.NewReader(c.Data), int64(len(c.Data)), map[string]string{
		"Content-Type":    "application/offset+octet-stream",
		"Upload-Offset":   strconv.FormatInt(c.Off, 10),
		"Upload-Checksum": t.checksum(c),
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		err := httpError(resp, "PATCH")
		if errors.Is(err, xfer.ErrNotFound) {
			t.forget()
		}
		return err
	}
	end := c.Off + int64(len(c.Data))
	if got := resp.Header.Get("Upload-Offset"); got != strconv.FormatInt(end, 10) {
		return fmt.Errorf("PATCH: server at offset %s, want %d", got, end)
	}
	u.serverSum = resp.Header.Get(headerSHA256)
	return nil
}

// Cause is err: every PATCH has its own answer.
func (u *upload) Cause(err error) error { return err }

// Finish returns the SHA-256 the server verified and landed the file
// with: the completing PATCH's answer, or the HEAD's of an upload found
// finished. Without either (a resumed upload that had all its bytes, an
// empty file), an empty PATCH at the end asks the server to complete it,
// and answers its error if the file cannot land: the hash is printed only
// for a file in place. Before, such an upload was taken for done with the
// client's own hash although its Finish had failed on the server (found
// by hand, 2026-11-29). A server that is not sluice's answers no hash:
// tus has none, and the client's is returned. It forgets the URL once the
// upload is done.
func (u *upload) Finish(sum []byte) ([]byte, error) {
	t := u.t
	if u.serverSum == "" && t.finishedSum != "" {
		u.serverSum = t.finishedSum
	}
	if u.serverSum == "" && t.url != "" {
		if err := u.complete(); err != nil {
			return nil, err
		}
	}
	t.forget()
	if u.serverSum == "" {
		return sum, nil
	}
	return hex.DecodeString(u.serverSum)
}

// complete sends the empty PATCH at the upload's end that has the server
// finish an upload whose bytes all arrived.
func (u *upload) complete() error {
	t := u.t
	resp, err := t.do(u.ctx, http.MethodPatch, t.url, bytes.NewReader(nil), 0, map[string]string{
		"Content-Type":  "application/offset+octet-stream",
		"Upload-Offset": strconv.FormatInt(u.size, 10),
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return httpError(resp, "PATCH")
	}
	u.serverSum = resp.Header.Get(headerSHA256)
	return nil
}

func (u *upload) Close() {}
