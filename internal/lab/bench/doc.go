// Package bench holds the measurement harnesses behind `sluice bench` and
// `sluice log bench`: each runs sluice and the baseline a user would compare
// it with side by side in one process, and reports numbers and ratios.
package bench
