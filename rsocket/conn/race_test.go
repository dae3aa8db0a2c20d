//go:build race

package conn

// raceEnabled: the race detector makes allocation counts meaningless.
const raceEnabled = true
