package delivery

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/defaults"
)

// Defaults for zero SenderConfig fields, from internal/defaults (the
// agent's, so that every layer has the same ones). The RTO values are RFC
// 6298's: over one ordered stream a timeout only fires if the sink lost a
// message without breaking the stream, so resending early buys little and
// costs bandwidth. The reconnect back-off is short because the next
// attempt may go to another sink (failover).
const (
	DefaultInitialRTO   = defaults.InitialRTO
	DefaultMinRTO       = defaults.MinRTO
	DefaultMaxRTO       = defaults.MaxRTO
	DefaultReconnectMin = defaults.ReconnectMin
	DefaultReconnectMax = defaults.ReconnectMax
)

// SenderConfig configures a Sender. The zero value is valid: auto window,
// RFC 6298 timeouts, the agent's reconnect back-off.
type SenderConfig struct {
	// Watermark is the persisted watermark the agent resumes from: the
	// first id the driver will feed in Spooled. Default 0.
	Watermark uint64

	// MaxInFlightMsgs and MaxInFlightBytes bound what is sent and not yet
	// acknowledged, on top of the sink's credits. Zero in one of them means
	// no bound in that dimension.
	//
	// Both zero (the default) selects the auto window, sized like BBR's
	// congestion window to twice the measured bandwidth-delay product of
	// the whole path, storage commit included: max delivery rate over the
	// last ten RTTs × min RTT over the last 10 s × 2, at least 64 KiB and
	// 4 messages. Every 10 s it drops to that floor for 200 ms plus one
	// RTT to re-measure the min RTT. Window returns the current size.
	MaxInFlightMsgs  int
	MaxInFlightBytes int64

	// InitialRTO is the retransmission timeout before the first RTT sample
	// (default 1s). The RTO always stays within [MinRTO, MaxRTO] (defaults
	// 1s and 60s).
	InitialRTO time.Duration
	MinRTO     time.Duration
	MaxRTO     time.Duration

	// ReconnectMin is the delay before the first reconnect after a failure
	// (default 100ms); it doubles with each consecutive failure up to
	// ReconnectMax (default 5s).
	ReconnectMin time.Duration
	ReconnectMax time.Duration

	// ProgressTimeout, if not zero, is how long messages may be in flight,
	// or wait for credit, on a stream with no ack before Tick emits
	// Stalled: the sink is frozen or the path is dead in a way the
	// transport does not report.
	// Zero (the default) disables it.
	ProgressTimeout time.Duration
}

func (c *SenderConfig) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.MinRTO, DefaultMinRTO)
	def(&c.MaxRTO, DefaultMaxRTO)
	def(&c.InitialRTO, min(max(DefaultInitialRTO, c.MinRTO), c.MaxRTO))
	def(&c.ReconnectMin, DefaultReconnectMin)
	def(&c.ReconnectMax, max(DefaultReconnectMax, c.ReconnectMin))
}

func (c *SenderConfig) validate() error {
	switch {
	case c.MaxInFlightMsgs < 0 || c.MaxInFlightBytes < 0:
		return fmt.Errorf("%w: negative MaxInFlightMsgs or MaxInFlightBytes", ErrInvalidConfig)
	case c.MinRTO < 0 || c.MinRTO > c.MaxRTO:
		return fmt.Errorf("%w: need 0 <= MinRTO <= MaxRTO, have %v and %v", ErrInvalidConfig, c.MinRTO, c.MaxRTO)
	case c.InitialRTO < c.MinRTO || c.InitialRTO > c.MaxRTO:
		return fmt.Errorf("%w: InitialRTO %v outside [MinRTO, MaxRTO]", ErrInvalidConfig, c.InitialRTO)
	case c.ProgressTimeout < 0:
		return fmt.Errorf("%w: negative ProgressTimeout %v", ErrInvalidConfig, c.ProgressTimeout)
	case c.ReconnectMin < 0 || c.ReconnectMin > c.ReconnectMax:
		return fmt.Errorf("%w: need 0 <= ReconnectMin <= ReconnectMax, have %v and %v", ErrInvalidConfig, c.ReconnectMin, c.ReconnectMax)
	}
	return nil
}

// Stats are cumulative counters over the Sender's life.
type Stats struct {
	Sent     uint64 // Send actions, resends included
	Resent   uint64 // Send actions of a message sent before
	Acked    uint64 // messages newly acknowledged
	Timeouts uint64 // live timeouts (stale ones are not counted)
	Rejected uint64 // Rejected events for a message in flight
	Parked   uint64 // of those, the non-retryable ones
	SetAside uint64 // parked messages settled by SetAside (dead letters)
}
