//go:build race

package extension

// raceEnabled: the race detector makes allocation counts meaningless.
const raceEnabled = true
