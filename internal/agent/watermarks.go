package agent

// SpoolNext is the id the next spooled message will get: every record an
// ingest call has returned for is in a message below it. With
// AckedWatermark it tells a caller when what it ingested so far has
// reached the sink (the public client's Producer.Flush).
func (a *Agent) SpoolNext() uint64 { return a.spool.Log().NextOffset() }

// AckedWatermark is the persisted acknowledged watermark: every message id
// below it is acknowledged by the sink. It trails the acks by at most the
// loop's persist interval (100ms), never leads them.
func (a *Agent) AckedWatermark() uint64 { return a.spool.AckedWatermark() }

// SkippedIDs are the message ids [from, to) the spool skipped when this
// agent started, because the run before reserved them and did not stop
// cleanly (seglog.Log.SkippedAtOpen); from == to when none.
func (a *Agent) SkippedIDs() (from, to uint64) { return a.spool.Log().SkippedAtOpen() }
