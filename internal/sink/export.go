package sink

import "github.com/sluicehq/sluice/internal/store"

// Reader returns the embedded store as the sink's exporters read it
// (internal/export); nil when messages go to Kafka (Config.Store).
func (s *Sink) Reader() store.Reader { return s.reader }

// NewBodyDecoder returns a decoder of the store's message bodies, with
// the sink's dictionaries, for one reader of the store that is not a
// Read stream (an exporter): not safe for concurrent use.
func (s *Sink) NewBodyDecoder() *store.BodyDecoder { return &store.BodyDecoder{Dicts: s.dicts} }
