package agent

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
)

// Liveness defaults. A frozen sink (a stopped process, a half-open TCP
// connection, a stuck middlebox) answers nothing and breaks nothing, so
// without deadlines the agent would wait on it forever. Three independent
// checks catch it: the handshake deadline (no Welcome), the progress
// deadline (messages in flight, no ack), and gRPC keepalive pings (no
// answer to a ping, which also catches an idle connection).
const (
	// DefaultHandshakeTimeout bounds the wait for the sink's Welcome.
	DefaultHandshakeTimeout = defaults.HandshakeTimeout
	// DefaultProgressTimeout is how long messages may stay in flight with
	// no ack at all before the stream is taken for dead. A sink acks
	// within its store's commit latency, so 20 s is far above a healthy
	// sink and still lets failover to another sink happen within 30 s.
	DefaultProgressTimeout = defaults.ProgressTimeout
	// KeepaliveTime is the idle time after which the agent pings the
	// sink. gRPC clients cannot ping more often than every 10 s, and the
	// sink's enforcement policy allows pings every 5 s or more.
	KeepaliveTime = defaults.KeepaliveTime
	// DefaultKeepaliveTimeout is how long a ping may go unanswered.
	DefaultKeepaliveTimeout = defaults.KeepaliveTimeout
)

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Ready reports whether the agent can do its job now: it has a session
// with a sink and its spool is writable. It backs the agent's /readyz.
func (a *Agent) Ready() error {
	if err := a.driver.Ready(); err != nil {
		return err
	}
	return a.SpoolWritable()
}

// Healthy reports whether the agent can still recover by itself. It backs
// the agent's /healthz: after a failed fdatasync the spool refuses writes
// until the process restarts (what the kernel holds for the file can no
// longer be trusted; reopening re-reads what is on disk), so the agent
// says so, and a supervisor with a liveness probe restarts it. So it does
// when a spooled message cannot be read back (Spool.ReadFailed): a restart
// meets the start-up check, which names the damage. Everything
// else (no sink, a full disk) heals without a restart and only makes
// the agent not ready.
func (a *Agent) Healthy() error {
	if err := a.spool.Broken(); err != nil {
		return fmt.Errorf("spool %s needs a restart after a failed fdatasync: %w", a.cfg.SpoolDir, err)
	}
	if err := a.spool.Unreadable(); err != nil {
		// The message is parked, the others go on; only the check at
		// start-up says where the damage is and how to repair it.
		return fmt.Errorf("spool %s needs a restart: a spooled message cannot be read back (the start-up check names the damage): %w", a.cfg.SpoolDir, err)
	}
	return nil
}
