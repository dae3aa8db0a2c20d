package post

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/xfer"
)

// ServePost serves Handler on a fresh loopback port over HTTP/1.1,
// or with h2c only: the plain-HTTP baselines of `sluice bench upload`.
// Close the server when done.
func ServePost(s xfer.Backend, h2c bool) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	hs := &http.Server{Handler: Handler(s), ReadHeaderTimeout: 10 * time.Second}
	if h2c {
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetUnencryptedHTTP2(true)
	}
	go hs.Serve(ln)
	return hs, ln.Addr().String(), nil
}

// chunkReader hands out at most n bytes per Read: the "chunk" of a POST.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// PostFile sends one file to a Handler URL (…/post/NAME) as one POST
// body of size bytes, read chunk bytes at a time, from data or, if path
// is not "", from that file; it returns the SHA-256 the server answered.
func PostFile(ctx context.Context, cl *http.Client, url string, data []byte, path string, chunk int) ([]byte, error) {
	var body io.Reader = bytes.NewReader(data)
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		body = f
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &chunkReader{r: body, n: chunk})
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(data))
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return hex.DecodeString(strings.TrimSpace(string(b)))
}
