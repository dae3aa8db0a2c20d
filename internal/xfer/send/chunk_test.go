package send

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/xfer"
)

// TestCheckChunk: the chunk bound follows the transport. Before, every
// transport was held to gRPC's 8 MiB, so `--chunk 16MiB` was refused for
// tus although `--chunk auto` picks 16 MiB there (found by hand,
// 2026-11-29).
func TestCheckChunk(t *testing.T) {
	for _, c := range []struct {
		to    string
		chunk int
		ok    bool
	}{
		{"grpc://h:1", 0, true},
		{"grpc://h:1", xfer.MaxChunk, true},
		{"grpc://h:1", xfer.MaxChunk + 1, false},
		{"tcp://h:1", 16 << 20, false},
		{"http://h:1/files/", 16 << 20, true},
		{"https://h:1/files/", MaxTUSChunk, true},
		{"http://h:1/files/", MaxTUSChunk + 1, false},
		{"grpc://h:1", -1, false},
	} {
		err := CheckChunk(c.to, c.chunk)
		if (err == nil) != c.ok {
			t.Errorf("CheckChunk(%q, %d) = %v, want ok=%v", c.to, c.chunk, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "tus up to 64MiB") {
			t.Errorf("CheckChunk(%q, %d): %v does not give tus's bound", c.to, c.chunk, err)
		}
	}
}
