#!/usr/bin/env bash
# race.sh: the concurrent cores' tests under the race detector (what CI
# runs after the README's test command). Each package here runs
# goroutines against shared state the tests drive from several sides: the
# RSocket implementation, the log, the agent, the sink, the file-transfer
# store, its gRPC, RSocket and tus servers and its senders (which lend
# chunks to the RSocket writer and hold gRPC's frames), the Kafka store's
# own writer (its connections' readers, its compressor). The whole module under -race takes too long
# for CI on two cores; these are where -race found what the plain run did
# not (2026-11-28: the agent's gRPC Send calling Recv beside its reader,
# seen through client's TestProduceIdempotentRetryIsDuplicate; a data race
# in diskstore's Acquire, seen through TestInteropTusFrozen; a test
# reading one gRPC stream from two goroutines, TestWaitingSendsPerConnection,
# which then hung; `sluice hostile`'s reset mode replacing a connection
# while the end of the run stopped it, TestHostileListeners).
#
#   scripts/race.sh            the packages below
#   scripts/race.sh ./...      anything else, the same way
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=("$@")
if [ ${#pkgs[@]} -eq 0 ]; then
  pkgs=(./rsocket/... ./seglog/... ./internal/agent/... ./internal/sink/
    ./internal/xfer/diskstore/ ./internal/xfer/tus/ ./internal/xfer/grpcxfer/ ./internal/xfer/rsocketxfer/
    ./internal/xfer/send/ ./internal/xfer/serve/ ./internal/transport/... ./client/...
    ./internal/lab/hostile/ ./internal/store/kafkastore/)
fi
go test -count=1 -race "${pkgs[@]}"
