package status

import "github.com/sluicehq/sluice/internal/export"

// Exporters lists the sink's --export exporters with their position, lag
// and failures.
func Exporters(list func() []export.Status) Provider {
	return func(s *Snapshot) {
		if s.Sink == nil {
			return
		}
		s.Sink.Exporters = list()
	}
}
