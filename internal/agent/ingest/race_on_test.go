//go:build race

package ingest

// raceEnabled: the race detector allocates on its own (and sync.Pool drops
// items at random under it), so allocation counts mean nothing under it.
const raceEnabled = true
