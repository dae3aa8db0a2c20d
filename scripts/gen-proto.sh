#!/usr/bin/env bash
# gen-proto.sh regenerates the Go code for the protobuf API under api/.
#
#   bash scripts/gen-proto.sh          # (re)generate, in place
#   bash scripts/gen-proto.sh --check  # generate into a temp dir and fail if
#                                      # the committed code differs
#
# Normally run as `go generate ./api/...` from the module root (see
# api/sluice/v1/generate.go). It installs what it needs on a fresh Debian
# machine:
#   - protoc from Debian's protobuf-compiler package (apt-get, as root or via
#     sudo) when protoc is not on PATH;
#   - protoc-gen-go and protoc-gen-go-grpc at the pinned versions below, with
#     `go install` from the Go module proxy, into a versioned directory under
#     $(go env GOPATH)/bin that is put first on PATH for protoc only.
#
# The protoc version is written into the generated files' headers; the
# committed code was made with EXPECTED_PROTOC below (Debian bookworm).
# Another protoc version changes those header lines, so it is warned about.
set -euo pipefail

# Pinned code generator versions. Bump them together with the committed code.
PROTOC_GEN_GO_VERSION=v1.36.12     # google.golang.org/protobuf, same as go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1  # google.golang.org/grpc/cmd/protoc-gen-go-grpc
EXPECTED_PROTOC="libprotoc 3.21.12"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

log() { echo "gen-proto: $*" >&2; }

# --- protoc -----------------------------------------------------------------
if ! command -v protoc >/dev/null 2>&1; then
  log "protoc not found; installing Debian package protobuf-compiler"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      log "need root (or sudo) to apt-get install protobuf-compiler"
      exit 1
    fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
fi
protoc_version="$(protoc --version)"
if [ "$protoc_version" != "$EXPECTED_PROTOC" ]; then
  log "warning: $protoc_version, committed code was made with $EXPECTED_PROTOC;" \
    "the version comments in the generated headers will differ"
fi

# --- protoc-gen-go, protoc-gen-go-grpc --------------------------------------
# A directory per version pair, so a stale plugin of another version on PATH
# or in GOPATH/bin is never used.
bindir="$(go env GOPATH)/bin/sluice-protoc-plugins/go-${PROTOC_GEN_GO_VERSION}_grpc-${PROTOC_GEN_GO_GRPC_VERSION}"
install_plugin() { # name, module path@version, expected `--version` output
  local name="$1" pkg="$2" want="$3"
  if [ -x "$bindir/$name" ] && [ "$("$bindir/$name" --version 2>/dev/null)" = "$want" ]; then
    return
  fi
  log "installing $pkg into $bindir"
  mkdir -p "$bindir"
  # Outside the module, so go.mod neither constrains nor records the tools.
  (cd / && GOBIN="$bindir" GOFLAGS= go install "$pkg")
  local got
  got="$("$bindir/$name" --version)"
  if [ "$got" != "$want" ]; then
    log "$name reports '$got', want '$want'"
    exit 1
  fi
}
install_plugin protoc-gen-go \
  "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}" \
  "protoc-gen-go ${PROTOC_GEN_GO_VERSION}"
install_plugin protoc-gen-go-grpc \
  "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}" \
  "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"

# --- generate ---------------------------------------------------------------
# Every .proto under api/, named relative to api/ (sluice/v1/sluice.proto) so
# the import path matches the package (sluice.v1). Sorted for a stable order.
mapfile -t protos < <(cd api && find . -name '*.proto' -printf '%P\n' | LC_ALL=C sort)
if [ "${#protos[@]}" -eq 0 ]; then
  log "no .proto files under api/"
  exit 1
fi

out=api
if [ "$check" -eq 1 ]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi

PATH="$bindir:$PATH" protoc \
  --proto_path=api \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  "${protos[@]}"

if [ "$check" -eq 1 ]; then
  status=0
  while IFS= read -r f; do
    if ! cmp -s "$out/$f" "api/$f"; then
      log "api/$f is stale; run: go generate ./api/..."
      status=1
    fi
  done < <(cd "$out" && find . -name '*.go' -printf '%P\n' | LC_ALL=C sort)
  if [ "$status" -eq 0 ]; then
    log "generated code is up to date"
  fi
  exit "$status"
fi
log "generated from ${protos[*]} ($protoc_version, protoc-gen-go ${PROTOC_GEN_GO_VERSION}, protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION})"
