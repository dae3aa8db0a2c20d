//go:build race

package frame

// raceEnabled: the race detector makes allocation counts meaningless.
const raceEnabled = true
