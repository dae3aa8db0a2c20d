package rsocket

import (
	"context"
	"strings"
	"testing"
)

// TestURLWithoutScheme: HOST:PORT without a scheme, given to Listen or
// Dial, says which URLs are wanted, not url.Parse's "first path segment
// in URL cannot contain colon" (found by hand with `rsocket serve
// --listen 127.0.0.1:7878`).
func TestURLWithoutScheme(t *testing.T) {
	const want = "want tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH"
	if _, _, err := Listen("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Listen without a scheme: %v", err)
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Dial without a scheme: %v", err)
	}
}
