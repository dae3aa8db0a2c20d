package export

import (
	"net/http"
	"testing"
	"time"
)

// Prometheus and OTLP/HTTP: 2xx taken, 429 and 5xx retried (and 408, a
// timeout on the way), any other 4xx dropped by the sender.
func TestClassify(t *testing.T) {
	for status, want := range map[int]outcome{
		200: accepted, 204: accepted, 400: poison, 401: poison, 404: poison, 413: poison,
		408: retry, 429: retry, 500: retry, 502: retry, 503: retry, 504: retry, 302: retry,
	} {
		if got := classify(status); got != want {
			t.Errorf("classify(%d) = %v, want %v", status, got, want)
		}
	}
}

// The back-off doubles from backoffMin to backoffMax; a receiver's
// Retry-After replaces it, up to maxRetryAfter.
func TestBackoff(t *testing.T) {
	for _, c := range []struct {
		failed     int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, backoffMin}, {2, 0, 2 * backoffMin}, {4, 0, 8 * backoffMin}, {30, 0, backoffMax}, {1000, 0, backoffMax},
		{1, 7 * time.Second, 7 * time.Second}, {9, time.Second, time.Second}, {1, time.Hour, maxRetryAfter},
	} {
		if got := backoff(c.failed, c.retryAfter); got != c.want {
			t.Errorf("backoff(%d, %v) = %v, want %v", c.failed, c.retryAfter, got, c.want)
		}
	}
}

// Retry-After is seconds or an HTTP date (RFC 9110 10.2.3); garbage or a
// date past is no Retry-After; a huge one is capped.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "0": 0, "-1": 0, "soon": 0, "99999999": maxRetryAfter,
		now.Add(10 * time.Second).Format(http.TimeFormat): 10 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := parseRetryAfter(h, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", h, got, want)
		}
	}
}

// --export takes remote-write=URL and otlp=URL with an http(s) URL; a
// password in the URL is masked in the name, and the group follows the
// name; the same exporter twice is refused.
func TestParseTargets(t *testing.T) {
	ts, err := ParseTargets([]string{"remote-write=http://u:secret@127.0.0.1:9090/api/v1/write", "otlp=https://collector:4318/"})
	if err != nil {
		t.Fatal(err)
	}
	if n := ts[0].Name(); n != "remote-write=http://u:xxxxx@127.0.0.1:9090/api/v1/write" {
		t.Errorf("name %q: want the password masked", n)
	}
	if g := ts[0].Group(); g != "export:"+ts[0].Name() {
		t.Errorf("group %q", g)
	}
	if e := ts[1].endpoint(3); e != "https://collector:4318/v1/logs" {
		t.Errorf("OTLP logs endpoint %q", e)
	}
	if _, err := ParseTargets([]string{"otlp=http://a/", "remote-write=http://a/", "otlp=http://a/p", "otlp=http://a:81/"}); err != nil {
		t.Errorf("different receivers refused: %v", err)
	}
	ts, err = ParseTargets([]string{"remote-write=http://a/w,otlp=http://b/?x=1,2"})
	if err != nil || len(ts) != 2 || ts[1].URL.RawQuery != "x=1,2" {
		t.Errorf("a comma-joined list (a --config YAML list): %v, %v", ts, err)
	}
	for _, bad := range [][]string{
		{"remote-write"}, {"kafka=http://x"}, {"otlp=ftp://x"}, {"otlp=http://"}, {"otlp=:bad"},
		{"otlp=http://a:1", "otlp=http://a:1"},
		// One receiver written two ways (found by hand: a trailing "/"
		// made a second exporter sending every record again).
		{"otlp=http://a:1", "otlp=http://a:1/"},
		{"remote-write=http://h/api/v1/write", "remote-write=http://h/api/v1/write/"},
		{"remote-write=http://H:80/w", "remote-write=http://h/w"},
		{"otlp=https://u:p@c:443/x", "otlp=https://c/x/"},
	} {
		if _, err := ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) accepted", bad)
		}
	}
}
