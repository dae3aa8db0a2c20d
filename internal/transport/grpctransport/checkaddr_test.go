package grpctransport

import (
	"strings"
	"testing"
)

// TestCheckAddr: a sink address gRPC would take and never reach is an
// error at once, saying what to give (found by hand: `--sink 127.0.0.1`
// dialed port 443, `--sink tcp://HOST:PORT` failed as "too many colons",
// both retried for ever as "the sink is down or unreachable").
func TestCheckAddr(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.1:7400", ""},
		{"[::1]:7400", ""},
		{"sink.example:7400", ""},
		{"dns:///sink.example:7400", ""},
		{"unix:///run/sluice.sock", ""},
		{"127.0.0.1", "the port is required"},
		{"sink.example", "the port is required"},
		{"127.0.0.1:", "the port is required"},
		{"tcp://127.0.0.1:7400", "tcp:// is not a sink address"},
		{"http://127.0.0.1:7400", "http:// is not a sink address"},
		{"", "want HOST:PORT"},
	} {
		err := CheckAddr(c.addr)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckAddr(%q) = %v, want %q", c.addr, err, c.want)
		}
	}
	if _, _, err := Connect("127.0.0.1", ClientOptions{}); err == nil {
		t.Errorf("Connect to an address without a port: no error")
	}
}
