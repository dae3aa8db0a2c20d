// Package sluicev1 is the sluice wire protocol, version 1: the protobuf
// messages and the gRPC Sink service generated from sluice.proto.
//
// Agents deliver batches to the sink over Sink.Send, one long-lived
// bidirectional stream per agent, within credits the sink grants; the sink
// acks each message once it is durable. Consumers read the sink's store over
// Sink.Read. A batch payload (Request.plain, or the decompressed zstd and
// zstd_dict payloads) is encoded by package internal/batch.
//
// sluice.proto is the source of truth; sluice.pb.go and sluice_grpc.pb.go are
// generated from it and committed. Regenerate them from the module root with
//
//	go generate ./api/...
//
// which runs scripts/gen-proto.sh. The script installs protoc (Debian's
// protobuf-compiler) and pinned versions of protoc-gen-go and
// protoc-gen-go-grpc if they are missing; `bash scripts/gen-proto.sh --check`
// fails if the committed code is stale.
package sluicev1

//go:generate bash ../../../scripts/gen-proto.sh
