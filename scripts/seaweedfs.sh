#!/usr/bin/env bash
# Single-process SeaweedFS (`weed mini`: master, volume, filer and the S3
# API) for the S3 store tests of file transfer (internal/xfer/s3store) and
# `sluice bench upload --store s3://...`. Loopback only. No Docker.
#
#   scripts/seaweedfs.sh build
#   scripts/seaweedfs.sh start  [--dir DIR] [--timeout SECS] [--watch-pid PID]
#   scripts/seaweedfs.sh stop   [--dir DIR] [--kill]
#   scripts/seaweedfs.sh status [--dir DIR]
#   scripts/seaweedfs.sh env    [--dir DIR]
#
# build   Builds the weed binary once, pinned to SeaweedFS's Go module
#         version below, in a tools module of its own (its go.mod needs a
#         replace directive, so `go install pkg@version` is refused), and
#         caches it in ${XDG_CACHE_HOME:-~/.cache}/sluice/seaweedfs-VERSION/weed
#         ($SLUICE_WEED overrides). About 4 minutes on 2 cores. Prints the
#         binary's path.
# start   Builds if needed, starts `weed mini` on 127.0.0.1 with its data in
#         DIR and waits until the S3 API answers. The last (and only) line on
#         stdout is the endpoint, http://127.0.0.1:PORT. Credentials: the
#         AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY of the environment (an
#         identity weed creates), default sluice / sluice-secret. Bucket
#         "sluice" is created. Idempotent: a running weed in DIR is reused.
#         --watch-pid PID: a watchdog stops weed and removes DIR when PID
#         exits (tests use it, so a killed `go test` leaves nothing behind).
# stop    SIGTERM (SIGKILL after 20 s; at once with --kill) and removes DIR.
# status  "running http://127.0.0.1:PORT pid N" (exit 0) or "not running" (1).
# env     SLUICE_S3_ENDPOINT=..., AWS_ACCESS_KEY_ID=..., AWS_SECRET_ACCESS_KEY=...
#
# DIR defaults to /tmp/sluice-seaweedfs. Exit codes: 0 ok; 1 failure; 2
# usage; 3 weed cannot be built here (no Go toolchain, or the module proxy
# unreachable): internal/testkit/s3test skips on 3 and fails on anything else.
set -euo pipefail

# The version the Go module proxy serves (weed 4.53); see
# /work/shared/field-notes.md §5. Pinned: change only on purpose.
WEED_VERSION="${SLUICE_WEED_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
CACHE_DIR="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/sluice/seaweedfs-$WEED_VERSION"
WEED="${SLUICE_WEED:-$CACHE_DIR/weed}"
RUN_DIR="/tmp/sluice-seaweedfs"
READY_TIMEOUT=60
STOP_TIMEOUT=20
HARD_KILL=0
WATCH_PID=""
MARKER=.sluice-seaweedfs
BUCKET=sluice
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-sluice}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-sluice-secret}"

log() { printf 'seaweedfs.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
unavailable() { log "unavailable: $*"; exit 3; }
usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# ---------------------------------------------------------------- build

cmd_build() {
	if [[ -x "$WEED" ]]; then
		echo "$WEED"
		return 0
	fi
	command -v go >/dev/null 2>&1 || unavailable "no go toolchain to build weed"
	mkdir -p "$CACHE_DIR/src"
	exec 9>>"$CACHE_DIR/build.lock"
	command -v flock >/dev/null 2>&1 && flock 9
	if [[ -x "$WEED" ]]; then
		echo "$WEED"
		return 0
	fi
	cat >"$CACHE_DIR/src/go.mod" <<EOF
module sluice.local/weedtools

go 1.26

// SeaweedFS's own go.mod replaces this module; a build outside it must too.
replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0
EOF
	cat >"$CACHE_DIR/src/tools.go" <<'EOF'
//go:build tools

package weedtools

import _ "github.com/seaweedfs/seaweedfs/weed"
EOF
	log "building weed $WEED_VERSION into $WEED (about 4 min on 2 cores; log in $CACHE_DIR/build.log)"
	local t0=$SECONDS
	if ! (cd "$CACHE_DIR/src" && GOFLAGS=-mod=mod nice go get "github.com/seaweedfs/seaweedfs/weed@$WEED_VERSION" &&
		GOFLAGS=-mod=mod nice go build -o "$WEED.tmp" github.com/seaweedfs/seaweedfs/weed) >"$CACHE_DIR/build.log" 2>&1; then
		tail -n 5 "$CACHE_DIR/build.log" >&2
		if grep -qiE 'dial tcp|no such host|connection refused|i/o timeout|proxy.golang.org' "$CACHE_DIR/build.log"; then
			unavailable "the Go module proxy is unreachable (log: $CACHE_DIR/build.log)"
		fi
		die "building weed failed (log: $CACHE_DIR/build.log)"
	fi
	mv "$WEED.tmp" "$WEED"
	log "built in $((SECONDS - t0)) s"
	echo "$WEED"
}

# ---------------------------------------------------------------- run

alive() {
	[[ "$1" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null || return 1
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[[ "${stat:0:1}" != Z ]]
}

running_pid() {
	local pid
	pid="$(cat "$RUN_DIR/weed.pid" 2>/dev/null)" || return 1
	alive "$pid" || return 1
	tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "-dir=$RUN_DIR/data" || return 1
	echo "$pid"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 30000))
}

# s3_ready PORT: the S3 API answers (any HTTP status: an unsigned request
# gets 403, which is enough to know the gateway is up).
s3_ready() {
	local code
	code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/" 2>/dev/null)" || return 1
	[[ "$code" =~ ^[1-5][0-9][0-9]$ ]]
}

# bucket_ready PORT: a signed HEAD of the bucket answers 200 (weed creates
# -bucket a moment after its S3 port opens).
bucket_ready() {
	local code
	code="$(curl -s -o /dev/null -w '%{http_code}' -I --aws-sigv4 "aws:amz:us-east-1:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "http://127.0.0.1:$1/$BUCKET" 2>/dev/null)" || return 1
	[[ "$code" == 200 ]]
}

stop_weed() {
	local pid i
	pid="$(running_pid)" || return 0
	if ((HARD_KILL)); then
		kill -KILL "$pid" 2>/dev/null || true
	else
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
		alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
	fi
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	rm -f "$RUN_DIR/weed.pid"
}

start_watchdog() {
	[[ -n "$WATCH_PID" ]] || return 0
	kill -0 "$WATCH_PID" 2>/dev/null || die "--watch-pid $WATCH_PID: no such process"
	setsid bash "${BASH_SOURCE[0]}" __watchdog --dir "$RUN_DIR" --watch-pid "$WATCH_PID" \
		</dev/null >/dev/null 2>&1 9>&- &
}

# launch_weed starts weed mini on free ports, its pid in $RUN_DIR/weed.pid
# and its S3 endpoint in $RUN_DIR/endpoint; sets pid and port.
launch_weed() {
	local p=()
	port="$(free_port)"
	# Every other server weed mini runs gets a free port too: their
	# defaults (master 9333, volume 8080, filer 8888, admin 12535, and
	# gRPC at each plus 10000) collide when two test binaries (go test
	# runs packages in parallel) or two checkouts start their own weed.
	for _ in 1 2 3 4 5 6 7 8 9; do p+=("$(free_port)"); done
	mkdir -p "$RUN_DIR/data"
	rm -f "$RUN_DIR/weed.pid"
	echo "http://127.0.0.1:$port" >"$RUN_DIR/endpoint"
	# -ip and -ip.bind: without them weed binds every interface and
	# advertises a non-loopback address. Telemetry, WebDAV, the admin UI
	# and the Iceberg/Lance catalogs are off: tests need the S3 API only.
	# shellcheck disable=SC2016 # $$ and $@ are the child's
	PIDFILE="$RUN_DIR/weed.pid" setsid bash -c 'echo $$ >"$PIDFILE"; exec "$@"' weed "$WEED" mini \
		-dir="$RUN_DIR/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port="$port" -s3.port.grpc="${p[0]}" \
		-master.port="${p[1]}" -master.port.grpc="${p[2]}" -volume.port="${p[3]}" -volume.port.grpc="${p[4]}" \
		-filer.port="${p[5]}" -filer.port.grpc="${p[6]}" -admin.port="${p[7]}" -admin.port.grpc="${p[8]}" -admin.port.legacy=0 \
		-master.telemetry=false -webdav=false -admin.ui=false -s3.port.iceberg=0 -s3.port.lance=0 \
		-bucket="$BUCKET" </dev/null >>"$RUN_DIR/weed.log" 2>&1 9>&- &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "$RUN_DIR/weed.pid" ]] && break
		sleep 0.05
	done
	pid="$(cat "$RUN_DIR/weed.pid" 2>/dev/null)" || die "weed did not start (no pid file)"
}

# wait_ready waits until weed's S3 API and bucket answer; it fails when
# weed exits first, and dies when READY_TIMEOUT passes.
wait_ready() {
	local deadline=$((SECONDS + READY_TIMEOUT))
	until s3_ready "$port" && bucket_ready "$port"; do
		alive "$pid" || return 1
		((SECONDS < deadline)) || {
			tail -n 20 "$RUN_DIR/weed.log" >&2
			stop_weed
			die "weed's S3 API not ready within ${READY_TIMEOUT}s (log: $RUN_DIR/weed.log)"
		}
		sleep 0.2
	done
}

cmd_start() {
	mkdir -p "$RUN_DIR"
	if [[ ! -f "$RUN_DIR/$MARKER" ]]; then
		[[ -z "$(ls -A "$RUN_DIR")" ]] || die "--dir $RUN_DIR is neither empty nor a seaweedfs.sh run dir (no $MARKER file)"
		echo "run dir of scripts/seaweedfs.sh; 'scripts/seaweedfs.sh stop --dir DIR' removes it" >"$RUN_DIR/$MARKER"
	fi
	local pid port
	if pid="$(running_pid)"; then
		start_watchdog
		cat "$RUN_DIR/endpoint"
		return 0
	fi
	cmd_build >/dev/null
	# A port free_port found may be taken by another process before weed
	# binds it (go test runs packages in parallel, each may start its
	# own): weed then exits at once with "Port allocation failed", and
	# the start is tried again with fresh ports, up to 3 times.
	local attempt watching=""
	for attempt in 1 2 3; do
		launch_weed
		[[ -n "$watching" ]] || { start_watchdog; watching=1; }
		wait_ready && break
		((attempt < 3)) && grep -q "Port allocation failed" "$RUN_DIR/weed.log" || {
			tail -n 20 "$RUN_DIR/weed.log" >&2
			die "weed exited during startup (log: $RUN_DIR/weed.log)"
		}
		log "a port weed was given was taken meanwhile; starting it again with other ports"
	done
	log "ready (pid $pid, log $RUN_DIR/weed.log)"
	cat "$RUN_DIR/endpoint"
}

cmd_stop() {
	[[ -d "$RUN_DIR" ]] || return 0
	[[ -f "$RUN_DIR/$MARKER" ]] || die "$RUN_DIR is not a seaweedfs.sh run dir (no $MARKER file); not touching it"
	stop_weed
	rm -rf "$RUN_DIR"
}

cmd_status() {
	local pid
	if pid="$(running_pid)"; then
		echo "running $(cat "$RUN_DIR/endpoint") pid $pid"
	else
		echo "not running"
		return 1
	fi
}

cmd_env() {
	running_pid >/dev/null || die "no weed running in $RUN_DIR"
	printf 'SLUICE_S3_ENDPOINT=%s\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' \
		"$(cat "$RUN_DIR/endpoint")" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY"
}

cmd_watchdog() {
	while alive "$WATCH_PID"; do
		[[ -d "$RUN_DIR" ]] || exit 0
		sleep 1
	done
	STOP_TIMEOUT=10
	cmd_stop
}

[[ $# -ge 1 ]] || usage
CMD="$1"
shift
while [[ $# -gt 0 ]]; do
	case "$1" in
	--dir) RUN_DIR="${2:?--dir needs a value}"; shift 2 ;;
	--dir=*) RUN_DIR="${1#--dir=}"; shift ;;
	--timeout) READY_TIMEOUT="${2:?--timeout needs a value}"; shift 2 ;;
	--watch-pid) WATCH_PID="${2:?--watch-pid needs a value}"; shift 2 ;;
	--kill) HARD_KILL=1; shift ;;
	-h | --help) usage ;;
	*) log "unknown argument: $1"; usage ;;
	esac
done
[[ "$RUN_DIR" == /* ]] || RUN_DIR="$PWD/$RUN_DIR"
RUN_DIR="${RUN_DIR%/}"
[[ "$READY_TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout: not a number of seconds: $READY_TIMEOUT"

case "$CMD" in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
__watchdog) cmd_watchdog ;;
-h | --help | help) usage ;;
*) log "unknown command: $CMD"; usage ;;
esac
