package delivery

import "errors"

var (
	// ErrInvalidEvent is wrapped by every error a Step returns: the event
	// was malformed, of an unknown kind, or impossible in the current state
	// (a driver bug, not a network condition). A Step that fails changes
	// nothing, so the driver may log the error and carry on.
	ErrInvalidEvent = errors.New("delivery: invalid event")
	// ErrInvalidConfig is wrapped by NewSender and NewReceiver errors.
	ErrInvalidConfig = errors.New("delivery: invalid config")
)
