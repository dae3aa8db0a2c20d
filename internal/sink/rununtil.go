package sink

import (
	"context"
	"errors"
	"fmt"
)

// RunUntil keeps the sink serving until ctx ends or served (what its
// transport's Serve returns) says the listener failed, then closes it in
// order: the exporters stopped (stopExport: they commit into the store,
// which must still be open), streams finished and the queue stored
// (Close), then afterClose (the RSocket connections go: their sessions
// have ended with their status), then the listener's end awaited.
func (s *Sink) RunUntil(ctx context.Context, served <-chan error, stopExport, afterClose func()) error {
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: finishing the streams, storing what is queued")
	case err := <-served:
		// Serve only returns early when the listener fails.
		stopExport()
		cerr := s.Close()
		return errors.Join(err, cerr)
	}
	stopExport()
	if err := s.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	afterClose()
	if err := <-served; err != nil {
		return err
	}
	s.log.Info("sink stopped")
	return nil
}
