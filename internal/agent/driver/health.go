package driver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
)

// Reasons the agent itself ends a connection; they are the code label of
// sluice_agent_last_error next to the protocol's session statuses.
var (
	errHandshakeTimeout = errors.New("no Welcome from the sink within the handshake deadline")
	errNoProgress       = errors.New("no ack from the sink within the progress deadline while messages were in flight")
	errVersionMismatch  = errors.New("protocol version mismatch")
)

// failure is a classified connection error.
type failure struct {
	code      string // metric label: a protocol.Status name or one of the agent's own reasons
	permanent bool   // retrying will not help until someone changes a configuration
	hint      string // what to do about it, for the log
}

// classify sorts a connection error into what an operator must fix and what
// clears up by itself. The agent retries both (a fixed token or a
// redeployed sink must be picked up without a restart), but logs the first
// kind at ERROR.
func classify(err error) failure {
	switch {
	case errors.Is(err, errHandshakeTimeout):
		return failure{code: "HandshakeTimeout", hint: "the sink accepts connections but does not answer: frozen, overloaded, or not a sluice sink"}
	case errors.Is(err, errNoProgress):
		return failure{code: "ProgressTimeout", hint: "the sink stopped acknowledging: frozen, or its store is stuck"}
	case errors.Is(err, errVersionMismatch):
		return failure{code: "VersionMismatch", permanent: true, hint: "upgrade the agent or the sink so they speak the same protocol version"}
	}
	st := protocol.StatusOf(err)
	msg := err.Error()
	switch st {
	case protocol.StatusPermissionDenied, protocol.StatusUnauthenticated:
		if strings.Contains(msg, "may not send as agent") {
			// The token is good, the id is not its: an agent started
			// without --agent-id took a random one (found by hand).
			return failure{code: st.String(), permanent: true, hint: "the token belongs to another agent id: start the agent with --agent-id set to the id the sink's tokens file gives it"}
		}
		return failure{code: st.String(), permanent: true, hint: "check the agent's token (--token/--token-file) and the sink's token list"}
	case protocol.StatusAborted:
		// The sink keeps one session per agent id: a newer Hello with this
		// id replaced ours. This agent had not given up on the stream, so
		// another process uses the same id.
		return failure{code: st.String(), permanent: true, hint: "a newer session with this agent id replaced this one on the sink: " +
			"another agent uses the same --agent-id (give each its own; two agents with one id also lose each other's messages " +
			"as duplicates); reconnecting after --reconnect-max"}
	case protocol.StatusFailedPrecondition:
		if strings.Contains(msg, protocol.IDsTakenDetail) {
			return failure{code: "IDsTaken", permanent: true, hint: "the sink holds messages numbered by another spool under this agent id " +
				"(this spool recreated or restored under the same --agent-id, or the id given to two agents); its messages stay in the spool: " +
				"give this agent its own id (restart it with a new --agent-id and --change-agent-id); reconnecting after --reconnect-max"}
		}
	case protocol.StatusInvalid:
		return failure{code: st.String(), permanent: true, hint: "the sink refuses this agent's requests: check that agent and sink versions match"}
	case protocol.StatusUnknown:
		// A gRPC server without the Sink service answers Unimplemented,
		// which the protocol has no status for.
		if strings.Contains(msg, "unknown service") || strings.Contains(msg, "unknown method") {
			return failure{code: "Unimplemented", permanent: true, hint: "the address is not a sluice sink, or one too old for this agent"}
		}
	case protocol.StatusUnavailable:
		// Resolution and TLS failures come from the transport as
		// Unavailable with a message; only the message tells them from a
		// sink that is down.
		if strings.Contains(msg, "name resolver") || strings.Contains(msg, "no such host") ||
			strings.Contains(msg, "produced zero addresses") || strings.Contains(msg, "missing port") {
			return failure{code: "BadAddress", permanent: true, hint: "check the --sink address"}
		}
		if strings.Contains(msg, "authentication handshake failed") || strings.Contains(msg, "tls:") || strings.Contains(msg, "x509") {
			return failure{code: "TLS", permanent: true, hint: "check the TLS flags (--tls-ca, --tls-cert, --tls-server-name)"}
		}
		if strings.Contains(msg, "error reading server preface: EOF") || strings.Contains(msg, "error reading server preface") && strings.Contains(msg, "connection reset") {
			// A TLS listener closes a connection that speaks plain
			// HTTP/2 to it without a word (found by hand: the same
			// "down or unreachable" as a stopped sink).
			return failure{code: st.String(), hint: "the sink closed the connection before answering: if it serves TLS, add --tls-ca; retrying"}
		}
		return failure{code: st.String(), hint: "the sink is down or unreachable; retrying"}
	}
	return failure{code: st.String(), permanent: !protocol.IsRetryable(err) && st != protocol.StatusCanceled, hint: "retrying"}
}

// health is the driver's view of its sink connection, for logs, metrics
// and Ready. The loop writes it; Ready reads it.
type health struct {
	mu        sync.Mutex
	connected string             // the sink's address while a stream is established
	lastErr   error              // the newest connection failure
	logged    map[string]failure // per sink address: the failure last logged
}

// ready reports whether a stream to a sink is established.
func (h *health) ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.connected != "" {
		return nil
	}
	if h.lastErr != nil {
		return fmt.Errorf("not connected to a sink: %w", h.lastErr)
	}
	return errors.New("not connected to a sink yet")
}

// connectedTo records an established stream; it returns the failure last
// logged for addr, if any, so the loop can log the recovery.
func (d *Driver) connectedTo(addr string) (recovered *failure) {
	h := &d.health
	h.mu.Lock()
	h.connected = addr
	if f, ok := h.logged[addr]; ok {
		recovered = &f
		delete(h.logged, addr)
	}
	h.mu.Unlock()
	d.metrics.SinkConnected()
	return recovered
}

// failed records a connection failure (a failed dial or a broken stream)
// and logs it when it differs from the last failure logged for that
// address: an agent retrying every few seconds against a sink that refuses
// its token says so once, at ERROR, and again only if the cause changes.
func (d *Driver) failed(addr string, err error) {
	f := classify(err)
	h := &d.health
	h.mu.Lock()
	lastErr := fmt.Errorf("%s: %w", addr, err)
	h.connected, h.lastErr = "", lastErr
	if h.logged == nil {
		h.logged = map[string]failure{}
	}
	prev, seen := h.logged[addr]
	h.logged[addr] = f
	h.mu.Unlock()
	d.metrics.SinkFailed(f.code, lastErr)
	switch {
	case seen && prev.code == f.code:
		d.log.Debug("sink connection failed again", "sink", addr, "code", f.code, "err", err)
	case f.permanent:
		d.log.Error("cannot deliver to sink; retrying, but this will not clear up by itself",
			"sink", addr, "code", f.code, "err", err, "hint", f.hint)
	default:
		d.log.Warn("sink connection failed", "sink", addr, "code", f.code, "err", err, "hint", f.hint)
	}
}

// Ready is nil while a session with a sink is established, and otherwise
// says why not.
func (d *Driver) Ready() error { return d.health.ready() }

// handshakeDeadline cancels ctx with errHandshakeTimeout unless stop is
// called first.
func handshakeDeadline(d time.Duration, cancel context.CancelCauseFunc) (stop func() bool) {
	t := time.AfterFunc(d, func() { cancel(errHandshakeTimeout) })
	return t.Stop
}

// humanBytes formats a byte count for logs: 262144 → "256 KiB".
func humanBytes[T ~int | ~int32 | ~int64 | ~uint64](n T) string {
	v := float64(n)
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", int64(n))
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
