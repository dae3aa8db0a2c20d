// Package rsocketgo tests sluice's RSocket implementation against
// rsocket-go v0.8.16 in both directions. It is a module of its own so that
// rsocket-go never becomes a dependency of sluice.
package rsocketgo
