package post

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Upload POSTs size bytes of body to url (a Handler's /post/NAME) with c
// and returns the SHA-256 the server answers once the file is in place.
func Upload(ctx context.Context, c *http.Client, url string, body io.Reader, size int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return hex.DecodeString(strings.TrimSpace(string(b)))
}
