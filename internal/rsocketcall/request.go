package rsocketcall

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/rsocket/extension"
)

// Metadata is a request's metadata: metadata (when hasMetadata), or with
// a route composite metadata: the route (message/x.rsocket.routing.v0),
// then metadata as a text/plain entry.
func Metadata(metadata string, hasMetadata bool, route string) ([]byte, error) {
	var md []byte
	if hasMetadata {
		md = []byte(metadata)
	}
	if route == "" {
		return md, nil
	}
	tags, err := extension.AppendRouting(nil, route)
	if err != nil {
		return nil, err
	}
	comp, err := extension.AppendCompositeWellKnown(nil, extension.MIMERSocketRouting, tags)
	if err != nil {
		return nil, err
	}
	if hasMetadata {
		return extension.AppendCompositeEntry(comp, "text/plain", md)
	}
	return comp, nil
}

// CheckURLs refuses an entry of a comma-separated server list that is not
// SCHEME://HOST:PORT..., before dialing: a bare HOST:PORT failed in
// url.Parse with "first path segment in URL cannot contain colon".
func CheckURLs(urls string) error {
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		scheme, rest, ok := strings.Cut(u, "://")
		pu, err := url.Parse(u)
		known := scheme == "tcp" || scheme == "tls" || scheme == "ws" || scheme == "wss"
		// A port is required, and must be one: before, these reached the
		// dial and failed there with exit 1 (found by hand, 2026-11-29).
		if !ok || rest == "" || !known || err != nil || !validPort(pu.Port()) {
			return fmt.Errorf("bad --url %q: want tcp://HOST:PORT or ws://HOST:PORT/PATH (tls:// and wss:// with TLS)", u)
		}
	}
	return nil
}

// validPort reports whether p is a port number, 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}
