#!/bin/bash
# Bytes per sample: Prometheus remote-write's snappy against what the
# agent sends the sink for the same samples. A Prometheus (Debian's, see
# scripts/install-prometheus.sh) scrapes itself every second and
# remote-writes to `sluice agent` (default queue settings) for DURATION
# seconds; then the script reads Prometheus' own counters (bytes sent,
# samples sent) and the agent's (message bytes before and after
# compression) and prints both per sample. Loopback only, no WAN: this
# measures bytes, not time.
#
# With TRAIN=SECONDS, a first run of that long (agent defaults) stores
# the workload's records in a sink, `sluice dict train --records-from`
# trains a dictionary on them (1 MiB asked, 64 KiB sample messages: a
# few columnar requests each), and the measured run's agent uses it
# (--dict): Prometheus starts afresh, so the measured requests are not
# the ones trained on.
# Usage: SLUICE=path/to/sluice [TRAIN=30] scripts/remote-write-bytes.sh [DURATION] [agent flags...]
#   e.g. scripts/remote-write-bytes.sh 60 --compression-level better
set -u
S=${SLUICE:-sluice}; DUR=${1:-60}; shift || true
D=$(mktemp -d); cd "$D"
PS=; PA=; PP=
# Prometheus first, while the agent still answers: on SIGTERM it flushes
# its remote-write queue for up to a minute.
stop_all() { kill $PP 2>/dev/null; wait $PP 2>/dev/null; kill $PS $PA 2>/dev/null; wait 2>/dev/null; }
trap 'stop_all; rm -rf "$D"' EXIT

# start RUN [agent flags...]: a sink, an agent and a Prometheus scraping
# itself and remote-writing to the agent, all under $D/RUN.
start() {
  local run=$1; shift
  mkdir -p "$D/$run"
  $S sink --listen 127.0.0.1:27601 --data "$D/$run/sink" > "$run/sink.log" 2>&1 & PS=$!
  $S agent --sink 127.0.0.1:27601 --spool "$D/$run/spool" --ingest 127.0.0.1:27602 --metrics 127.0.0.1:27603 "$@" > "$run/agent.log" 2>&1 & PA=$!
  cat > "$run/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  external_labels: {sluice_bench: remote-write-bytes}
scrape_configs:
  - job_name: self
    static_configs: [{targets: ['127.0.0.1:27604']}]
remote_write:
  - url: http://127.0.0.1:27602/api/v1/write
YML
  sleep 2
  prometheus --config.file="$run/prometheus.yml" --storage.tsdb.path="$D/$run/tsdb" --web.listen-address=127.0.0.1:27604 \
    --web.enable-lifecycle > "$run/prometheus.log" 2>&1 & PP=$!
}

if [ -n "${TRAIN:-}" ]; then
  start train
  sleep "$TRAIN"
  $S dict train --records-from 127.0.0.1:27601 --message 64KiB --size 1MiB --out "$D/rw.dict" || exit 1
  stop_all
  set -- "$@" --dict "$D/rw.dict"
fi
start measure "$@"
sleep "$DUR"
# Stop scraping (reload without scrape_configs), wait until Prometheus has
# sent everything it scraped, and only then read both sides' counters: a
# slow answer (a long --linger) leaves samples queued in Prometheus that
# the agent would count and Prometheus not yet.
sed -i '/^scrape_configs:/,/static_configs/d' measure/prometheus.yml
curl -s -X POST http://127.0.0.1:27604/-/reload
for i in $(seq 1 120); do
  pending=$(curl -s http://127.0.0.1:27604/metrics | awk '$1 ~ /^prometheus_remote_storage_samples_pending/ {s += $2} END {print s+0}')
  [ "$pending" = 0 ] && break; sleep 1
done
sleep 2
prom=$(curl -s http://127.0.0.1:27604/metrics)
agent=$(curl -s http://127.0.0.1:27603/metrics)
val() { echo "$1" | awk -v m="$2" '$1 ~ "^"m"({|$)" {s += $2} END {printf "%.0f", s}'; }
samples=$(val "$prom" prometheus_remote_storage_samples_total)
# Samples and metadata: the agent stores both kinds of request.
snappy=$(( $(val "$prom" prometheus_remote_storage_bytes_total) + $(val "$prom" prometheus_remote_storage_metadata_bytes_total) ))
raw=$(val "$agent" sluice_agent_message_bytes_uncompressed_total)
wire=$(val "$agent" sluice_agent_message_bytes_compressed_total)
echo "duration ${DUR}s, agent flags: ${*:-(defaults)}"
echo "samples sent by Prometheus: $samples"
awk -v n="$samples" -v s="$snappy" -v r="$raw" -v w="$wire" 'BEGIN {
  printf "remote-write (snappy, per request; samples and metadata): %d bytes, %.2f bytes/sample\n", s, s/n
  printf "agent messages, uncompressed:        %d bytes, %.2f bytes/sample\n", r, r/n
  printf "agent messages, compressed (to sink): %d bytes, %.2f bytes/sample\n", w, w/n
  printf "snappy / agent compressed: %.2fx\n", s/w }'
grep -cE "level=(WARN|ERROR)" measure/agent.log | xargs echo "agent warnings/errors:"
