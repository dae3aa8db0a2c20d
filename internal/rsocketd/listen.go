package rsocketd

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// CheckListen checks `rsocket serve`'s --listen URLs before anything
// listens, so that a URL that would not serve what it says is a usage
// error naming the flag and value rather than a surprise: tcp:// and
// tls:// take HOST:PORT only (a path, query or fragment would be
// ignored); ws:// and wss:// take HOST:PORT and an optional path, and
// without one (or with "/") serve RSocket on every path, as the
// "listening ws://HOST:PORT/" line shows; no query or fragment; a port
// is required, and a scheme; the same URL given twice, or two listeners on one
// HOST:PORT (port 0 aside), is refused.
func CheckListen(listen []string) error {
	seen := map[string]string{} // host:port → the URL that takes it
	given := map[string]bool{}
	for _, raw := range listen {
		if given[raw] {
			return fmt.Errorf("--listen %s given twice", raw)
		}
		given[raw] = true
		u, err := url.Parse(raw)
		if err != nil || !strings.Contains(raw, "://") {
			u = &url.URL{} // "127.0.0.1:7878" parses badly: say what is wanted
		}
		switch u.Scheme {
		case "tcp", "tls":
			if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return fmt.Errorf("--listen %s: %s:// takes no path, query or user (want %s://HOST:PORT; paths are for ws:// and wss://)", raw, u.Scheme, u.Scheme)
			}
		case "ws", "wss":
			if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return fmt.Errorf("--listen %s: want %s://HOST:PORT/PATH, without a query, fragment or user", raw, u.Scheme)
			}
		default:
			return fmt.Errorf("--listen %q: want tcp://HOST:PORT, tls://HOST:PORT, ws://HOST:PORT/PATH or wss://HOST:PORT/PATH", raw)
		}
		if u.Port() == "" {
			return fmt.Errorf("--listen %s: no port (want %s://HOST:PORT)", raw, u.Scheme)
		}
		if u.Port() == "0" {
			continue
		}
		hp := net.JoinHostPort(u.Hostname(), u.Port())
		if other, ok := seen[hp]; ok {
			return fmt.Errorf("--listen %s and --listen %s both listen on %s", other, raw, hp)
		}
		seen[hp] = raw
	}
	return nil
}
