// Package xferv1 is the gRPC API of sluice's file transfer: the Xfer
// service (client-streaming Upload, unary Offset) generated from
// xfer.proto. Regenerate with `go generate ./api/...` from the module root
// (scripts/gen-proto.sh generates every .proto under api/).
package xferv1
