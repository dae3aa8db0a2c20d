#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, combined broker+controller) for local
# development and tests, from Maven Central jars. No Docker, no tarball.
#
#   scripts/kafka.sh start  [--dir DIR] [--timeout SECS] [--watch-pid PID]
#   scripts/kafka.sh stop   [--dir DIR] [--keep-data] [--kill]
#   scripts/kafka.sh status [--dir DIR]
#   scripts/kafka.sh env    [--dir DIR]
#   scripts/kafka.sh fetch
#   scripts/kafka.sh tools-env
#
# start   Fetches the Kafka jars if needed (mvn, once; see scripts/kafka/pom.xml),
#         formats KRaft storage in DIR on first use, starts the broker in the
#         background and waits until it answers a Metadata request. The last
#         (and only) line on stdout is the bootstrap address, 127.0.0.1:PORT.
#         Idempotent: if the broker in DIR is running, prints its address.
#         If DIR holds a broker stopped with --keep-data, restarts it on the
#         same ports and data. --watch-pid PID: a watchdog stops the broker
#         and removes DIR's data when process PID exits (used by tests, so a
#         killed `go test` leaves no broker behind).
# stop    SIGTERM, then SIGKILL after $SLUICE_KAFKA_STOP_TIMEOUT (20 s), and
#         removes what start wrote into DIR. --keep-data keeps config and data
#         for a later start; --kill sends SIGKILL at once (a crash).
# status  "running 127.0.0.1:PORT pid N" (exit 0) or "not running" (exit 1).
# env     KAFKA_BOOTSTRAP=127.0.0.1:PORT (exit 1 if not running).
# fetch   Only download/copy the jars (CI cache warm-up).
# tools-env  Fetches the client tools jars (kafka-tools, for
#         org.apache.kafka.tools.ProducerPerformance; scripts/kafka/tools-pom.xml)
#         into their own cache dir ($SLUICE_KAFKA_TOOLS_LIBS overrides) and
#         prints KAFKA_JAVA=JAVA and KAFKA_TOOLS_LIBS=DIR (run java -cp 'DIR/*').
#
# DIR defaults to /tmp/sluice-kafka. Jars are cached in
# ${XDG_CACHE_HOME:-~/.cache}/sluice/kafka-VERSION/libs ($SLUICE_KAFKA_LIBS
# overrides). Java 17+ and Maven are installed with apt-get if missing.
#
# Exit codes: 0 ok; 1 failure; 2 usage; 3 Kafka cannot run on this machine
# (no Java/Maven and no way to install them, or Maven Central unreachable).
# internal/testkit/kafkatest skips tests on 3 and fails them on anything else.
#
# Environment: KAFKA_HEAP_OPTS (default -Xmx512m -Xms64m), KAFKA_JVM_OPTS
# (extra JVM flags), JAVA_HOME, SLUICE_KAFKA_VERSION, SLUICE_KAFKA_LIBS,
# SLUICE_KAFKA_STOP_TIMEOUT, SLUICE_KAFKA_CDS=0 (no class-data sharing
# archive; by default the first stopped broker leaves one next to the jars).
set -euo pipefail

KAFKA_VERSION="${SLUICE_KAFKA_VERSION:-4.1.2}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUPPORT_DIR="$SCRIPT_DIR/kafka"
POM="$SUPPORT_DIR/pom.xml"
CACHE_DIR="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/sluice/kafka-$KAFKA_VERSION"
LIBS="${SLUICE_KAFKA_LIBS:-$CACHE_DIR/libs}"
MARKER_JAR="kafka_2.13-$KAFKA_VERSION.jar" # proves a fetch of LIBS complete
RUN_DIR="/tmp/sluice-kafka"
READY_TIMEOUT=90
STOP_TIMEOUT="${SLUICE_KAFKA_STOP_TIMEOUT:-20}"
KEEP_DATA=0
HARD_KILL=0
WATCH_PID=""
JAVA=""
JAVA_VERSION_OUT=""

EX_UNAVAILABLE=3

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
unavailable() { log "unavailable: $*"; exit "$EX_UNAVAILABLE"; }
usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# lock FD FILE: exclusive lock on FILE held through FD (no-op without flock).
# FDs used: 7 run dir, 8 apt-get installs, 9 jar cache. Children that outlive
# this script get them closed (see launch), or they would hold the locks.
lock() {
	# shellcheck disable=SC2034 # file is read by the eval
	local fd="$1" file="$2"
	eval "exec $fd>>\"\$file\""
	if command -v flock >/dev/null 2>&1; then
		flock "$fd"
	fi
}
unlock() { eval "exec $1>&-"; }

# ---------------------------------------------------------------- toolchain

java_major() { # java_major "$(java -version 2>&1)" -> feature version (8, 11, 17, ...)
	local v
	v="$(sed -n 's/.*version "\([^"]*\)".*/\1/p' <<<"$1" | head -n1)"
	v="${v#1.}"
	printf '%s\n' "${v%%[.+_-]*}"
}

apt_install() { # apt_install PKG...; returns non-zero if that is impossible
	command -v apt-get >/dev/null 2>&1 || return 1
	local sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || return 1
		sudo=(sudo -n)
	fi
	log "installing $* with apt-get (output in $CACHE_DIR/apt.log)"
	mkdir -p "$CACHE_DIR"
	# Slim Debian images lack this dir and openjdk's postinst then fails.
	"${sudo[@]}" mkdir -p /usr/share/man/man1 2>/dev/null || true
	{
		# A partly failed update (one unreachable source) may still do.
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update || true
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y \
			-o DPkg::Lock::Timeout=300 --no-install-recommends "$@"
	} >"$CACHE_DIR/apt.log" 2>&1 || {
		tail -n 5 "$CACHE_DIR/apt.log" >&2
		return 1
	}
}

find_java() { # sets JAVA to a Java 17+ binary, or returns 1
	local c
	for c in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)" \
		/usr/lib/jvm/java-17-openjdk-*/bin/java /usr/lib/jvm/java-2[0-9]-openjdk-*/bin/java; do
		[[ -n "$c" && -x "$c" ]] || continue
		local out m
		out="$("$c" -version 2>&1)" || continue
		m="$(java_major "$out")"
		if [[ "$m" =~ ^[0-9]+$ ]] && ((m >= 17)); then
			JAVA="$c"
			JAVA_VERSION_OUT="$out"
			return 0
		fi
	done
	return 1
}

ensure_java() {
	[[ -n "$JAVA" ]] && return 0
	find_java && return 0
	lock 8 "$CACHE_DIR.install.lock" # one apt-get at a time
	find_java && return 0
	log "Java 17+ not found"
	local pkgs=(openjdk-17-jre-headless)
	# One apt-get run for both when Maven will be needed too.
	command -v mvn >/dev/null 2>&1 || libs_ready || pkgs+=(maven)
	apt_install "${pkgs[@]}" ||
		unavailable "java (17+) not found and apt-get failed to install ${pkgs[*]}"
	find_java || unavailable "java (17+) still not found after installing openjdk-17-jre-headless"
	unlock 8
}

ensure_maven() {
	command -v mvn >/dev/null 2>&1 && return 0
	lock 8 "$CACHE_DIR.install.lock"
	command -v mvn >/dev/null 2>&1 && return 0
	log "mvn not found"
	apt_install maven || unavailable "mvn not found and apt-get failed to install maven"
	command -v mvn >/dev/null 2>&1 || unavailable "mvn still not found after installing maven"
	unlock 8
}

# ---------------------------------------------------------------- jars

libs_stamp() { # identifies what LIBS must have been built from
	printf '%s %s\n' "$KAFKA_VERSION" "$(cksum <"$POM" | cut -d' ' -f1)"
}

libs_ready() {
	[[ -f "$LIBS/.complete" && "$(cat "$LIBS/.complete")" == "$(libs_stamp)" &&
		-f "$LIBS/$MARKER_JAR" ]]
}

fetch_libs() {
	libs_ready && return 0
	mkdir -p "$(dirname "$LIBS")"
	lock 9 "$LIBS.lock"
	if libs_ready; then
		unlock 9
		return 0
	fi
	ensure_maven
	local tmp mvnlog="$LIBS.mvn.log" t0=$SECONDS
	tmp="$(mktemp -d "$LIBS.tmp.XXXXXX")"
	log "fetching Kafka $KAFKA_VERSION jars from Maven Central into $LIBS"
	if ! mvn -B -q -ntp -Dstyle.color=never -f "$POM" \
		-Dkafka.version="$KAFKA_VERSION" \
		org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" \
		>"$mvnlog" 2>&1; then
		rm -rf "$tmp"
		sed 's/\x1b\[[0-9;]*m//g' "$mvnlog" | grep -m 1 -E '\[ERROR\] .' >&2 || tail -n 5 "$mvnlog" >&2
		if grep -qiE 'Could not transfer|UnknownHost|Unknown host|Connection (refused|reset|timed out)|connect timed out|Network is unreachable|No route to host|offline mode' "$mvnlog"; then
			unavailable "mvn could not download Kafka $KAFKA_VERSION from Maven Central (log: $mvnlog)"
		fi
		die "mvn dependency:copy-dependencies failed (log: $mvnlog)"
	fi
	[[ -f "$tmp/$MARKER_JAR" ]] || {
		rm -rf "$tmp"
		die "mvn finished but $MARKER_JAR is missing (log: $mvnlog)"
	}
	libs_stamp >"$tmp/.complete"
	rm -rf "$LIBS"
	mv "$tmp" "$LIBS"
	log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars in $((SECONDS - t0)) s"
	unlock 9
}

# ---------------------------------------------------------------- run dir

pid_file() { echo "$RUN_DIR/kafka.pid"; }
addr_file() { echo "$RUN_DIR/bootstrap"; }
props_file() { echo "$RUN_DIR/server.properties"; }

# alive PID: the process exists and is not a zombie (dead, not yet reaped).
alive() {
	[[ "$1" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null || return 1
	if [[ -r "/proc/$1/stat" ]]; then
		local stat
		stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
		stat="${stat##*) }"
		[[ "${stat:0:1}" != Z ]] || return 1
	fi
}

# is_ours PID: PID is a live broker started from this run dir.
is_ours() {
	local pid="$1"
	alive "$pid" || return 1
	if [[ -r "/proc/$pid/cmdline" ]]; then
		tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$(props_file)" || return 1
	fi
	return 0
}

running_pid() { # prints the broker pid if it is running
	local pid
	[[ -f "$(pid_file)" ]] || return 1
	pid="$(cat "$(pid_file)" 2>/dev/null || true)"
	is_ours "$pid" || return 1
	echo "$pid"
}

prop() { sed -n "s/^$1=//p" "$(props_file)" | tail -n1; }

free_ports() { # free_ports N: prints N distinct free TCP ports on 127.0.0.1
	# Below the kernel's ephemeral range (net.ipv4.ip_local_port_range),
	# so that no other process's port-0 socket is given a broker's port
	# while the broker is down between Kill or Stop and Restart (the
	# restart then fails: "now used by another process"); seen when two
	# test runs shared a machine, 2026-11-28.
	local lo=32768
	if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
		read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
	fi
	((lo > 11000)) || lo=32768
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$1" "$lo" <<'PY'
import random, socket, sys
n, lo = int(sys.argv[1]), int(sys.argv[2])
ports, socks = [], []
for _ in range(2000):
    if len(ports) == n:
        break
    p = random.randrange(10000, lo)
    if p in ports:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    ports.append(p)
    socks.append(s)
for s in socks:
    s.close()
if len(ports) < n:
    sys.exit("no free port found below " + str(lo))
print(" ".join(map(str, ports)))
PY
		return
	fi
	local ports=() p tries=0
	while ((${#ports[@]} < $1)); do
		((tries++ < 200)) || die "no free port found"
		p=$((10000 + RANDOM % (lo - 10000)))
		[[ " ${ports[*]} " == *" $p "* ]] && continue
		port_open "$p" && continue
		ports+=("$p")
	done
	echo "${ports[*]}"
}

port_open() { # port_open PORT: something accepts connections on 127.0.0.1:PORT
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# metadata_ok HOST PORT: the broker answers a Metadata request listing at
# least one (unfenced) broker and a controller.
metadata_ok() {
	if ! command -v python3 >/dev/null 2>&1; then
		# Without python3: port open and the broker logged that it started.
		port_open "$2" && grep -q 'Kafka Server started' "$RUN_DIR/logs/server.log" 2>/dev/null
		return
	fi
	python3 - "$1" "$2" <<'PY'
import socket, struct, sys
host, port = sys.argv[1], int(sys.argv[2])
def read(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b
try:
    s = socket.create_connection((host, port), timeout=2)
    s.settimeout(2)
    cid = b"kafka.sh"
    # Metadata v4 (the oldest Kafka 4.x serves): header v1, all topics, no auto-create.
    body = struct.pack(">hhih", 3, 4, 42, len(cid)) + cid + struct.pack(">ib", -1, 0)
    s.sendall(struct.pack(">i", len(body)) + body)
    (n,) = struct.unpack(">i", read(s, 4))
    r = read(s, n)
    corr, _throttle, nbrokers = struct.unpack_from(">iii", r, 0)
    off = 12
    for _ in range(nbrokers):
        off += 4
        (hl,) = struct.unpack_from(">h", r, off); off += 2 + hl + 4
        (rl,) = struct.unpack_from(">h", r, off); off += 2 + max(rl, 0)
    (cl,) = struct.unpack_from(">h", r, off); off += 2 + max(cl, 0)
    (controller,) = struct.unpack_from(">i", r, off)
    sys.exit(0 if corr == 42 and nbrokers >= 1 and controller >= 0 else 1)
except Exception:
    sys.exit(1)
PY
}

write_config() { # write_config BROKER_PORT CONTROLLER_PORT
	local bport="$1" cport="$2"
	mkdir -p "$RUN_DIR/data" "$RUN_DIR/logs"
	cat >"$(props_file)" <<EOF
# Written by scripts/kafka.sh: single-node KRaft broker+controller for tests.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$RUN_DIR/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# After a crash (stop --kill) the controller keeps the old broker registration
# until its session times out (default 9 s); keep restarts quick.
broker.session.timeout.ms=3000
broker.heartbeat.interval.ms=500
EOF
}

java_tool() { # java_tool CLASS ARGS...: run a Kafka CLI class quietly
	local cds=""
	if [[ "${SLUICE_KAFKA_CDS:-1}" == 1 && -s "$(cds_archive)" ]]; then
		cds="-XX:SharedArchiveFile=$(cds_archive)" # the broker's: ~0.5 s faster
	fi
	mkdir -p "$RUN_DIR/tmp"
	"$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -XX:-UsePerfData ${cds:+"$cds"} \
		-Djava.io.tmpdir="$RUN_DIR/tmp" \
		-Dlog4j2.configurationFile="$SUPPORT_DIR/tools-log4j2.properties" \
		-cp "$LIBS/*" "$@"
}

format_storage() {
	local cluster_id
	cluster_id="$(java_tool kafka.tools.StorageTool random-uuid)" ||
		die "kafka.tools.StorageTool random-uuid failed"
	java_tool kafka.tools.StorageTool format --standalone \
		--cluster-id "$cluster_id" --config "$(props_file)" >"$RUN_DIR/logs/format.log" 2>&1 || {
		cat "$RUN_DIR/logs/format.log" >&2
		die "kafka.tools.StorageTool format failed"
	}
}

# Class-data sharing: the first broker run with these jars and this JVM dumps
# the classes it loaded into an archive when it exits (save_cds, on stop);
# later runs map it and get ready 1-3 s sooner. An unusable archive only costs
# a warning in logs/stdout.log. SLUICE_KAFKA_CDS=0 turns this off.
cds_archive() {
	local key
	key="$(printf '%s\n%s\n%s\n' "$JAVA" "$JAVA_VERSION_OUT" "$(libs_stamp)" | cksum | cut -d' ' -f1)"
	echo "$(dirname "$LIBS")/cds-$key.jsa"
}

cds_opts() { # prints the JVM flag for class-data sharing, if any
	[[ "${SLUICE_KAFKA_CDS:-1}" == 1 ]] || return 0
	local archive
	archive="$(cds_archive)"
	if [[ -s "$archive" ]]; then
		echo "-XX:SharedArchiveFile=$archive"
	else
		echo "$archive" >"$RUN_DIR/cds.target"
		echo "-XX:ArchiveClassesAtExit=$RUN_DIR/cds.jsa"
	fi
}

save_cds() { # after the broker exited: move a dumped archive into the cache
	local target
	if [[ -s "$RUN_DIR/cds.jsa" && -s "$RUN_DIR/cds.target" ]]; then
		target="$(cat "$RUN_DIR/cds.target")"
		if [[ ! -s "$target" ]] && cp "$RUN_DIR/cds.jsa" "$target.tmp.$$" 2>/dev/null; then
			mv -f "$target.tmp.$$" "$target"
		fi
		rm -f "$target.tmp.$$"
	fi
	rm -f "$RUN_DIR/cds.jsa" "$RUN_DIR/cds.target"
}

launch() {
	local heap="${KAFKA_HEAP_OPTS:--Xmx512m -Xms64m}"
	local jvm=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent
		-XX:+ExitOnOutOfMemoryError -XX:-UsePerfData -Djava.awt.headless=true
		# snappy-java unpacks its .so here; a killed broker would leak it in /tmp.
		-Djava.io.tmpdir="$RUN_DIR/tmp")
	local cds
	cds="$(cds_opts)"
	# shellcheck disable=SC2206 # word splitting of the option strings is intended
	local cmd=("$JAVA" $heap "${jvm[@]}" ${cds:+"$cds"} ${KAFKA_JVM_OPTS:-}
		-Dkafka.logs.dir="$RUN_DIR/logs"
		-Dlog4j2.configurationFile="$SUPPORT_DIR/log4j2.properties"
		-cp "$LIBS/*" kafka.Kafka "$(props_file)")
	rm -f "$(pid_file)"
	mkdir -p "$RUN_DIR/tmp"
	# A new session, detached from our stdio, so callers reading our stdout
	# (go test) are not held open by the broker. The child writes its own
	# pid and execs java, so the pid file names the JVM itself.
	# shellcheck disable=SC2016 # $$ and $@ are the child's
	PIDFILE="$(pid_file)" setsid bash -c 'echo $$ >"$PIDFILE"; exec "$@"' kafka "${cmd[@]}" \
		</dev/null >>"$RUN_DIR/logs/stdout.log" 2>&1 7>&- 8>&- 9>&- &
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -s "$(pid_file)" ]] && return 0
		sleep 0.05
	done
	die "broker did not start (no pid file)"
}

wait_ready() { # wait_ready PID PORT: 0 ready, 1 the broker exited; dies on timeout
	local pid="$1" port="$2" deadline=$((SECONDS + READY_TIMEOUT))
	while ((SECONDS < deadline)); do
		alive "$pid" || return 1 # exited during startup
		if metadata_ok 127.0.0.1 "$port"; then
			return 0
		fi
		sleep 0.2
	done
	log "broker not ready after ${READY_TIMEOUT}s; last log lines:"
	tail -n 30 "$RUN_DIR/logs/server.log" >&2 2>/dev/null || true
	stop_broker 1
	die "broker did not become ready within ${READY_TIMEOUT}s (logs in $RUN_DIR/logs)"
}

stop_broker() { # stop_broker HARD: stop the running broker, if any
	local pid hard="$1" i
	pid="$(running_pid)" || return 0
	if ((hard)); then
		kill -KILL "$pid" 2>/dev/null || true
	else
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			log "broker (pid $pid) still running after ${STOP_TIMEOUT}s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	alive "$pid" && die "could not stop broker (pid $pid)"
	rm -f "$(pid_file)"
	save_cds
}

remove_run_files() {
	rm -rf "$RUN_DIR/data" "$RUN_DIR/logs" "$RUN_DIR/tmp"
	rm -f "$(props_file)" "$(pid_file)" "$(addr_file)" "$RUN_DIR/watchdog.pid" \
		"$RUN_DIR/cds.jsa" "$RUN_DIR/cds.target" "$RUN_DIR/.lock" "$RUN_DIR/$MARKER"
	rmdir "$RUN_DIR" 2>/dev/null || true
}

start_watchdog() {
	[[ -n "$WATCH_PID" ]] || return 0
	kill -0 "$WATCH_PID" 2>/dev/null || die "--watch-pid $WATCH_PID: no such process"
	local w
	w="$(cat "$RUN_DIR/watchdog.pid" 2>/dev/null || true)"
	[[ "$w" =~ ^[0-9]+$ ]] && kill -0 "$w" 2>/dev/null && return 0
	setsid bash "${BASH_SOURCE[0]}" __watchdog --dir "$RUN_DIR" --watch-pid "$WATCH_PID" \
		</dev/null >/dev/null 2>&1 7>&- 8>&- 9>&- &
	echo $! >"$RUN_DIR/watchdog.pid"
}

# ---------------------------------------------------------------- commands

# The marker file tells that DIR is ours, so stop may delete data/ and logs/
# in it (and start may reformat it); --dir must be a new or empty directory.
MARKER=.sluice-kafka

cmd_start() {
	mkdir -p "$RUN_DIR"
	if [[ ! -f "$RUN_DIR/$MARKER" ]]; then
		local f
		for f in "$RUN_DIR"/* "$RUN_DIR"/.[!.]*; do
			[[ -e "$f" && "$f" != "$RUN_DIR/.lock" ]] || continue
			die "--dir $RUN_DIR is neither empty nor a kafka.sh run dir (no $MARKER file)"
		done
		echo "run dir of scripts/kafka.sh; 'scripts/kafka.sh stop --dir DIR' removes it" >"$RUN_DIR/$MARKER"
	fi
	lock 7 "$RUN_DIR/.lock"
	local pid port fresh=0
	if pid="$(running_pid)"; then
		start_watchdog
		log "already running (pid $pid)"
		cat "$(addr_file)"
		return 0
	fi
	ensure_java
	fetch_libs
	if [[ -f "$(props_file)" && -f "$RUN_DIR/data/meta.properties" ]]; then
		port="$(prop listeners | sed -n 's/.*PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p')"
		local cport
		cport="$(prop controller.quorum.bootstrap.servers)"
		cport="${cport##*:}"
		for p in "$port" "$cport"; do
			port_open "$p" && die "port $p of the stopped broker in $RUN_DIR is now used by another process"
		done
		log "restarting broker in $RUN_DIR on 127.0.0.1:$port"
	else
		fresh=1
	fi
	local attempt t0
	for ((attempt = 1; ; attempt++)); do
		if ((fresh)); then
			rm -rf "$RUN_DIR/data" "$RUN_DIR/logs" "$RUN_DIR/tmp"
			local ports
			read -r -a ports <<<"$(free_ports 2)"
			port="${ports[0]}"
			write_config "${ports[0]}" "${ports[1]}"
			format_storage
			log "starting broker in $RUN_DIR on 127.0.0.1:$port"
		fi
		mkdir -p "$RUN_DIR/logs"
		echo "127.0.0.1:$port" >"$(addr_file)"
		t0=$SECONDS
		launch
		pid="$(cat "$(pid_file)")"
		start_watchdog
		wait_ready "$pid" "$port" && break
		rm -f "$(pid_file)"
		# Another process took a port between free_ports and the broker's bind.
		if ((fresh && attempt < 3)) && grep -qs 'Address already in use' "$RUN_DIR/logs/server.log"; then
			log "a port was taken meanwhile; retrying with new ports"
			continue
		fi
		log "broker exited during startup; last log lines:"
		tail -n 30 "$RUN_DIR/logs/server.log" "$RUN_DIR/logs/stdout.log" >&2 2>/dev/null || true
		die "broker did not start (logs in $RUN_DIR/logs)"
	done
	log "ready in $((SECONDS - t0)) s (pid $pid, logs in $RUN_DIR/logs)"
	cat "$(addr_file)"
}

cmd_stop() {
	[[ -d "$RUN_DIR" ]] || {
		log "not running"
		return 0
	}
	[[ -f "$RUN_DIR/$MARKER" ]] || die "$RUN_DIR is not a kafka.sh run dir (no $MARKER file); not touching it"
	lock 7 "$RUN_DIR/.lock"
	stop_broker "$HARD_KILL"
	if ((!KEEP_DATA)); then
		local w
		w="$(cat "$RUN_DIR/watchdog.pid" 2>/dev/null || true)"
		remove_run_files
		if [[ "$w" =~ ^[0-9]+$ && "$w" != "$$" ]]; then
			kill "$w" 2>/dev/null || true
		fi
	fi
	log "stopped"
}

cmd_status() {
	local pid
	if pid="$(running_pid)"; then
		echo "running $(cat "$(addr_file)") pid $pid"
	else
		echo "not running"
		return 1
	fi
}

cmd_env() {
	running_pid >/dev/null || die "no broker running in $RUN_DIR"
	echo "KAFKA_BOOTSTRAP=$(cat "$(addr_file)")"
}

cmd_fetch() {
	ensure_java
	fetch_libs
	echo "$LIBS"
}

# tools-env: the client tools (kafka-tools: ProducerPerformance, ...) live in
# their own directory, from their own pom, so the broker's jars and their
# stamp stay as they are for everyone sharing the cache.
cmd_tools_env() {
	POM="$SUPPORT_DIR/tools-pom.xml"
	LIBS="${SLUICE_KAFKA_TOOLS_LIBS:-$CACHE_DIR/tools-libs}"
	MARKER_JAR="kafka-tools-$KAFKA_VERSION.jar"
	ensure_java
	fetch_libs
	printf 'KAFKA_JAVA=%s\nKAFKA_TOOLS_LIBS=%s\n' "$JAVA" "$LIBS"
}

# __watchdog: waits for WATCH_PID to exit, then stops the broker and removes
# the run dir's data. Ends by itself once the run dir is gone.
cmd_watchdog() {
	while alive "$WATCH_PID"; do
		[[ -d "$RUN_DIR" ]] || exit 0
		sleep 1
	done
	[[ -d "$RUN_DIR" ]] || exit 0
	STOP_TIMEOUT=10
	cmd_stop
}

# ---------------------------------------------------------------- main

[[ $# -ge 1 ]] || usage
CMD="$1"
shift
while [[ $# -gt 0 ]]; do
	case "$1" in
	--dir) RUN_DIR="${2:?--dir needs a value}"; shift 2 ;;
	--dir=*) RUN_DIR="${1#--dir=}"; shift ;;
	--timeout) READY_TIMEOUT="${2:?--timeout needs a value}"; shift 2 ;;
	--watch-pid) WATCH_PID="${2:?--watch-pid needs a value}"; shift 2 ;;
	--keep-data) KEEP_DATA=1; shift ;;
	--kill) HARD_KILL=1; shift ;;
	-h | --help) usage ;;
	*) log "unknown argument: $1"; usage ;;
	esac
done
[[ "$RUN_DIR" == /* ]] || RUN_DIR="$PWD/$RUN_DIR"
RUN_DIR="${RUN_DIR%/}"
[[ "$READY_TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout: not a number of seconds: $READY_TIMEOUT"
mkdir -p "$CACHE_DIR" 2>/dev/null || true

case "$CMD" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
fetch) cmd_fetch ;;
tools-env) cmd_tools_env ;;
__watchdog) cmd_watchdog ;;
-h | --help | help) usage ;;
*) log "unknown command: $CMD"; usage ;;
esac
