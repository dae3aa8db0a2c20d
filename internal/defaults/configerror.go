package defaults

import (
	"errors"
	"fmt"
)

// ConfigError is a daemon's configuration that cannot run: settings out
// of range or missing. A command line gave it, so it exits 2 (the
// ExitCode of internal/cli's ExitCoder), as a bad flag value does; before,
// exit 1.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ExitCode is 2: a usage mistake.
func (e *ConfigError) ExitCode() int { return 2 }

// InvalidConfig is the ConfigError of daemon ("agent", "sink") for errs:
// "DAEMON: invalid config: " and each of them.
func InvalidConfig(daemon string, errs []error) error {
	return &ConfigError{fmt.Errorf("%s: invalid config: %w", daemon, errors.Join(errs...))}
}
