package agent

// SpoolWritable is a stand-in until the spool engineer's branch is merged:
// that branch adds the real check (the spool accepts writes) in spool.go,
// and this file must then be deleted.
func (a *Agent) SpoolWritable() error { return nil }
