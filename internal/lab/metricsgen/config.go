package metricsgen

import (
	"errors"
	"fmt"
	"time"
)

// Config describes the fleet and how its samples are batched into messages.
// A zero field takes the default shown; DefaultConfig returns them all.
type Config struct {
	// Seed selects the fleet (its hosts, targets and series) and every random
	// draw after that. Any value, including 0, is a valid seed.
	Seed int64

	// Hosts is the number of machines in the fleet. Default 200 (about
	// 68,000 series, 11 MB of records a scrape round). At most 10,000: the
	// fleet takes about 95 KB of memory a host.
	Hosts int

	// MeanMessageBytes is the mean size of a message, counted as the sum of
	// the lengths of its records (no framing). Default 16 KiB. It must lie
	// strictly between MinMessageBytes and MaxMessageBytes.
	MeanMessageBytes int

	// MinMessageBytes and MaxMessageBytes truncate the log-normal target
	// size of a message. Defaults 2 KiB and 400 KiB.
	MinMessageBytes int
	MaxMessageBytes int

	// MessageSigma is the shape σ of the log-normal message size (the
	// standard deviation of its logarithm): the larger, the more skewed.
	// Default 1.0. At most 3.
	MessageSigma float64

	// Partitions is the number of hash partitions the simulated collector
	// batches samples into: a series always goes to the same partition.
	// Default 16. At most 4096.
	Partitions int

	// MaxMessageAge flushes a partition whose first sample is this much
	// older (in simulated time) than an arriving one, whatever its size.
	// Default 5m, as in the collectors the model is drawn from. Negative
	// disables it. With the default fleet every partition reaches its
	// target size within one scrape round, so it only matters for small
	// fleets.
	MaxMessageAge time.Duration

	// ScrapeInterval is the simulated time between two scrapes of a target.
	// Default 15s. Whole milliseconds, at least 1ms.
	ScrapeInterval time.Duration

	// StartMillis is the Unix time in milliseconds of the first scrape
	// round. Default 1700000000000 (2023-11-14T22:13:20Z).
	StartMillis int64

	// RestartProbability is the chance that a target restarted just before
	// a given scrape, resetting its counters. Default 1e-4 (with 15s scrapes,
	// once every ~1.7 simulated days per target). Negative disables restarts.
	RestartProbability float64
}

// Defaults.
const (
	DefaultHosts              = 200
	DefaultMeanMessageBytes   = 16 << 10
	DefaultMinMessageBytes    = 2 << 10
	DefaultMaxMessageBytes    = 400 << 10
	DefaultMessageSigma       = 1.0
	DefaultPartitions         = 16
	DefaultMaxMessageAge      = 5 * time.Minute
	DefaultScrapeInterval     = 15 * time.Second
	DefaultStartMillis        = 1_700_000_000_000
	DefaultRestartProbability = 1e-4
)

// DefaultConfig returns the configuration used for zero fields, with Seed 1.
func DefaultConfig() Config {
	return Config{
		Seed:               1,
		Hosts:              DefaultHosts,
		MeanMessageBytes:   DefaultMeanMessageBytes,
		MinMessageBytes:    DefaultMinMessageBytes,
		MaxMessageBytes:    DefaultMaxMessageBytes,
		MessageSigma:       DefaultMessageSigma,
		Partitions:         DefaultPartitions,
		MaxMessageAge:      DefaultMaxMessageAge,
		ScrapeInterval:     DefaultScrapeInterval,
		StartMillis:        DefaultStartMillis,
		RestartProbability: DefaultRestartProbability,
	}
}

// withDefaults fills zero fields and checks the result.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.Hosts == 0 {
		c.Hosts = d.Hosts
	}
	if c.MinMessageBytes == 0 {
		c.MinMessageBytes = d.MinMessageBytes
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.MeanMessageBytes == 0 {
		c.MeanMessageBytes = d.MeanMessageBytes
	}
	if c.MessageSigma == 0 {
		c.MessageSigma = d.MessageSigma
	}
	if c.Partitions == 0 {
		c.Partitions = d.Partitions
	}
	if c.MaxMessageAge == 0 {
		c.MaxMessageAge = d.MaxMessageAge
	}
	if c.ScrapeInterval == 0 {
		c.ScrapeInterval = d.ScrapeInterval
	}
	if c.StartMillis == 0 {
		c.StartMillis = d.StartMillis
	}
	if c.RestartProbability == 0 {
		c.RestartProbability = d.RestartProbability
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Hosts < 1 || c.Hosts > 10_000 {
		bad("Hosts %d: want 1..10000", c.Hosts)
	}
	if c.MinMessageBytes < 1 || c.MaxMessageBytes > 1<<30 || c.MinMessageBytes >= c.MaxMessageBytes {
		bad("message sizes [%d, %d]: want 1 <= min < max <= 1GiB", c.MinMessageBytes, c.MaxMessageBytes)
	} else if c.MeanMessageBytes <= c.MinMessageBytes || c.MeanMessageBytes >= c.MaxMessageBytes {
		bad("MeanMessageBytes %d: want strictly between %d and %d", c.MeanMessageBytes, c.MinMessageBytes, c.MaxMessageBytes)
	}
	if !(c.MessageSigma > 0 && c.MessageSigma <= 3) {
		bad("MessageSigma %g: want (0, 3]", c.MessageSigma)
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		bad("Partitions %d: want 1..4096", c.Partitions)
	}
	if c.ScrapeInterval < time.Millisecond || c.ScrapeInterval%time.Millisecond != 0 {
		bad("ScrapeInterval %v: want whole milliseconds, at least 1ms", c.ScrapeInterval)
	}
	if c.StartMillis < 0 {
		bad("StartMillis %d: want >= 0", c.StartMillis)
	}
	if c.RestartProbability > 1 || c.RestartProbability != c.RestartProbability {
		bad("RestartProbability %g: want <= 1", c.RestartProbability)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("metricsgen: %w", err)
	}
	return c, nil
}
