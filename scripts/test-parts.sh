# Sourced by .ci/run and scripts/test-all.sh (from the repository's root):
# installs what the tests that skip without it need (Kafka's jars, the
# RSocket interop peers, the tus clients, redis-server, Chromium, Prometheus,
# the OpenTelemetry Python SDK, SeaweedFS's weed), each pinned, and sets
# SLUICE_KAFKA, SLUICE_INTEROP, SLUICE_REDIS, SLUICE_BROWSER,
# SLUICE_PROMETHEUS, SLUICE_OTEL and SLUICE_S3 to "require", so that a
# part that still cannot run fails its tests instead of skipping them.
# The real disk-full tests also need root (a tmpfs); nothing here gives it.

echo "== Kafka for the integration tests (installs Java and Maven from Debian if missing; jars from Maven Central)"
bash scripts/kafka.sh fetch
# A machine where Kafka cannot run must fail CI, not skip the Kafka tests.
export SLUICE_KAFKA=require

echo "== rsocket-py for the RSocket interop tests (pinned in interop/rsocket-py/requirements.txt, venv in ~/.cache/sluice)"
timeout 600 bash interop/rsocket-py/setup.sh

echo "== rsocket-java 1.1.5 for the RSocket interop tests (pinned in interop/rsocket-java/pom.xml; jars in ~/.m2, build in ~/.cache/sluice)"
timeout 600 bash interop/rsocket-java/setup.sh

echo "== rsocket-js for the RSocket interop tests (pinned in interop/rsocket-js/package-lock.json, npm ci into ~/.cache/sluice)"
timeout 600 bash interop/rsocket-js/setup.sh

echo "== tus clients for the xfer interop tests (tuspy, tus-js-client; pinned in interop/tus, installed in ~/.cache/sluice/tus)"
timeout 600 bash interop/tus/setup.sh

# A machine where a peer (Python, JS, Java RSocket; tus clients) cannot be installed must fail CI, not skip the interop tests.
export SLUICE_INTEROP=require

echo "== redis-server for the Redis rows of the request-response bench (Debian's package, scripts/install-redis.sh)"
timeout 600 bash scripts/install-redis.sh
# Without redis-server the Redis rows' test must fail CI, not skip.
export SLUICE_REDIS=require

echo "== the request-response bench's peers' modules (interop/rsocket-go, interop/redis: go mod download, so that their builds inside go test do not download)"
(cd interop/rsocket-go && timeout 600 go mod download) && (cd interop/redis && timeout 600 go mod download)

echo "== Prometheus for the remote-write tests, the agent's receiver and the sink's exporter (Debian's package, scripts/install-prometheus.sh)"
timeout 600 bash scripts/install-prometheus.sh
# Without prometheus the remote-write tests must fail CI, not skip.
export SLUICE_PROMETHEUS=require

echo "== Chromium for the status page's browser test (Debian's package; internal/status TestBrowserStatusPage)"
if ! command -v chromium >/dev/null; then
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  timeout 300 "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
  timeout 600 "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
chromium --version
# Without Chromium the browser test must fail CI, not skip.
export SLUICE_BROWSER=require

echo "== the OpenTelemetry Python SDK for the agent's OTLP test (pinned in interop/otel-py/requirements.txt, venv in ~/.cache/sluice)"
timeout 600 bash interop/otel-py/setup.sh
# Without the SDK the OTLP test must fail CI, not skip.
export SLUICE_OTEL=require

echo "== SeaweedFS for the S3 store tests (weed built once from its pinned Go module, ~4 min on 2 cores, cached in ~/.cache/sluice; scripts/seaweedfs.sh)"
timeout 1800 bash scripts/seaweedfs.sh build
# Without weed the S3 store's tests (internal/xfer/s3store, cmd/sluice) must fail CI, not skip.
export SLUICE_S3=require
