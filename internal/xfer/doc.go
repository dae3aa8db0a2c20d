// Package xfer is the contract of sluice's resumable, checksummed, atomic
// file transfer: what a store of uploads does (Backend), what a
// transport's client does for the upload loop (Transport), and the
// errors, wire codes, names and checksums every part shares.
//
// The parts, each a package under internal/xfer: diskstore, the
// local-disk store (one Backend); grpcxfer, rsocketxfer, tus and post,
// one per transport, each a server adapter over a Backend and its client
// in a file apart; serve, every adapter of a `sluice xfer serve`; send,
// the sending side, one upload loop over any Transport. Protobuf stays in
// the gRPC and RSocket adapters, whose wire it is. docs/xfer.md describes
// the design.
package xfer
