package rsocketd

import (
	"strings"
	"testing"
)

// TestCheckListen: `rsocket serve --listen` URLs that would not serve
// what they say are refused with the flag and value named: a path on
// tcp:// (ignored before), the same URL twice (before: two listeners on
// two ports for :0, or "address already in use" at run time), two
// listeners on one HOST:PORT, no port. ws:// without a path is taken: it
// serves on every path (TestRSocketServeWebSocketWithoutPath in
// cmd/sluice).
func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		listen []string
		want   string // "": accepted
	}{
		{[]string{"tcp://127.0.0.1:0", "ws://127.0.0.1:0/rsocket", "tls://127.0.0.1:0", "wss://127.0.0.1:0/x"}, ""},
		{[]string{"ws://127.0.0.1:0"}, ""},
		{[]string{"ws://127.0.0.1:7000/"}, ""},
		{[]string{"tcp://127.0.0.1:7000", "ws://127.0.0.1:7001/rsocket"}, ""},
		{[]string{"tcp://127.0.0.1:0/rsocket"}, "--listen tcp://127.0.0.1:0/rsocket: tcp:// takes no path"},
		{[]string{"tls://127.0.0.1:0/"}, "--listen tls://127.0.0.1:0/: tls:// takes no path"},
		{[]string{"tcp://127.0.0.1:0?x=1"}, "takes no path, query"},
		{[]string{"ws://127.0.0.1:0/a?x=1"}, "without a query"},
		{[]string{"tcp://127.0.0.1:0", "tcp://127.0.0.1:0"}, "--listen tcp://127.0.0.1:0 given twice"},
		{[]string{"ws://127.0.0.1:0/a", "tcp://127.0.0.1:0", "ws://127.0.0.1:0/a"}, "--listen ws://127.0.0.1:0/a given twice"},
		{[]string{"tcp://127.0.0.1:7000", "ws://127.0.0.1:7000/rsocket"}, "--listen tcp://127.0.0.1:7000 and --listen ws://127.0.0.1:7000/rsocket both listen on 127.0.0.1:7000"},
		{[]string{"ws://127.0.0.1/rsocket"}, "--listen ws://127.0.0.1/rsocket: no port"},
		{[]string{"http://127.0.0.1:7000"}, `--listen "http://127.0.0.1:7000": want tcp://HOST:PORT`},
		{[]string{"127.0.0.1:7878"}, `--listen "127.0.0.1:7878": want tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH`},
	} {
		err := CheckListen(c.listen)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want accepted", c.listen, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.listen, err, c.want)
		}
	}
}
