package export

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/internal/telemetry"
)

// Protocol is what an exporter speaks to its receiver.
type Protocol int

const (
	// RemoteWrite posts Prometheus remote-write 1.0 requests.
	RemoteWrite Protocol = iota + 1
	// OTLP posts OTLP/HTTP protobuf requests to URL/v1/metrics, /v1/logs
	// and /v1/traces.
	OTLP
)

// String is the protocol's name in --export.
func (p Protocol) String() string {
	switch p {
	case RemoteWrite:
		return "remote-write"
	case OTLP:
		return "otlp"
	}
	return fmt.Sprintf("protocol(%d)", int(p))
}

// carries reports whether records of kind k go out through p.
func (p Protocol) carries(k telemetry.Kind) bool {
	switch p {
	case RemoteWrite:
		return k == telemetry.RemoteWrite
	case OTLP:
		return k == telemetry.OTLPMetrics || k == telemetry.OTLPLogs || k == telemetry.OTLPTraces
	}
	return false
}

// Target is one --export value: a protocol and its receiver's URL.
type Target struct {
	Protocol Protocol
	URL      *url.URL
}

// ParseTarget parses "remote-write=URL" or "otlp=URL" (an http or https
// URL with a host).
func ParseTarget(s string) (Target, error) {
	name, raw, ok := strings.Cut(s, "=")
	if !ok {
		return Target{}, fmt.Errorf("%q: want remote-write=URL or otlp=URL", s)
	}
	var t Target
	switch name {
	case "remote-write":
		t.Protocol = RemoteWrite
	case "otlp":
		t.Protocol = OTLP
	default:
		return Target{}, fmt.Errorf("%q: unknown protocol %q (remote-write or otlp)", s, name)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("%q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Target{}, fmt.Errorf("%q: the URL must be http:// or https:// with a host", s)
	}
	t.URL = u
	return t, nil
}

// ParseTargets parses every --export value and refuses two with the same
// name (they would share one committed position) or the same receiver
// written two ways (they would send it every record twice): a trailing
// "/", the host's case, a default port or user info. A value may hold
// several, separated by commas (a --config file's YAML list arrives
// so): a comma followed by "remote-write=" or "otlp=" starts the next,
// any other comma belongs to the URL.
func ParseTargets(specs []string) ([]Target, error) {
	seen := make(map[string]bool)
	var ts []Target
	for _, s := range splitSpecs(specs) {
		t, err := ParseTarget(s)
		if err != nil {
			return nil, err
		}
		if seen[t.Group()] || seen[t.receiver()] {
			return nil, fmt.Errorf("%q is given twice", t.Name())
		}
		seen[t.Group()], seen[t.receiver()] = true, true
		ts = append(ts, t)
	}
	return ts, nil
}

// Name is how metrics, logs and the status page call the exporter: the
// --export value with any password in the URL masked.
func (t Target) Name() string { return t.Protocol.String() + "=" + t.URL.Redacted() }

// Group is the consumer group holding the exporter's committed position.
// It is derived from Name, not the whole URL, so that a password changed
// in the URL does not start the export over; a group name holds at most
// 255 bytes.
func (t Target) Group() string {
	g := "export:" + t.Name()
	if len(g) > 255 {
		g = g[:255]
	}
	return g
}

// receiver is the receiver t sends to, for ParseTargets to find one
// given twice: protocol, scheme, host lowercased without its scheme's
// default port, path without a trailing "/", and query.
func (t Target) receiver() string {
	host, port := strings.ToLower(t.URL.Hostname()), t.URL.Port()
	if (t.URL.Scheme == "http" && port == "80") || (t.URL.Scheme == "https" && port == "443") {
		port = ""
	}
	return fmt.Sprintf("receiver %s %s://%s:%s%s?%s", t.Protocol, strings.ToLower(t.URL.Scheme), host, port,
		strings.TrimRight(t.URL.EscapedPath(), "/"), t.URL.RawQuery)
}

// endpoint is the URL a record of kind k is posted to.
func (t Target) endpoint(k telemetry.Kind) string {
	if t.Protocol == RemoteWrite {
		return t.URL.String()
	}
	u := *t.URL
	base := strings.TrimSuffix(u.Path, "/")
	switch k {
	case telemetry.OTLPMetrics:
		u.Path = base + "/v1/metrics"
	case telemetry.OTLPLogs:
		u.Path = base + "/v1/logs"
	default:
		u.Path = base + "/v1/traces"
	}
	u.RawPath = ""
	return u.String()
}

// splitSpecs splits values holding several targets (ParseTargets).
func splitSpecs(specs []string) []string {
	var out []string
	for _, spec := range specs {
		for i, part := range strings.Split(spec, ",") {
			starts := strings.HasPrefix(part, RemoteWrite.String()+"=") || strings.HasPrefix(part, OTLP.String()+"=")
			if i > 0 && !starts {
				out[len(out)-1] += "," + part
				continue
			}
			out = append(out, part)
		}
	}
	return out
}
