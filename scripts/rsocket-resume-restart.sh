#!/usr/bin/env bash
# rsocket-resume-restart.sh: the by-hand check of docs/reliability.md's
# resume-journal rows. A journal that has seen an earlier session, a
# resumable stream of 2,000,000 items, `rsocket serve` SIGKILLed 0.5 s
# into it and started again with the same flags: the client must resume
# and end with "server restarted: the stream's handler is gone" (the
# session restored, its orphaned stream ended). Before 2026-11-29 the
# restore failed with "resume token in use" (3 of 3 runs).
#
#   RUNS=5 scripts/rsocket-resume-restart.sh
#
# Loopback only, port PORT (default 27991); each run bounded to about 40 s.
set -euo pipefail
runs=${RUNS:-5} port=${PORT:-27991}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'pkill -f "listen tcp://127.0.0.1:$port" 2>/dev/null || true; rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/sluice" ./cmd/sluice)
s=$work/sluice url=tcp://127.0.0.1:$port
restored=0
for i in $(seq 1 "$runs"); do
	d=$work/run$i
	mkdir -p "$d"
	"$s" rsocket serve --listen "$url" --resume-dir "$d/j" >"$d/s1.log" 2>&1 &
	sleep 1
	timeout 20 "$s" rsocket stream --url "$url" --data 200000 --resume >/dev/null 2>&1 || true
	(timeout 25 "$s" rsocket stream --url "$url" --data 2000000 --resume >/dev/null 2>"$d/client.err" || true) &
	client=$!
	sleep 0.5
	pkill -9 -f "listen $url" || true
	sleep 1
	"$s" rsocket serve --listen "$url" --resume-dir "$d/j" >"$d/s2.log" 2>&1 &
	wait "$client"
	pkill -f "listen $url" || true
	sleep 0.5
	if grep -q "server restarted" "$d/client.err"; then
		restored=$((restored + 1))
		echo "run $i: restored; the client: $(tail -1 "$d/client.err")"
	else
		echo "run $i: NOT restored; server: $(grep -o 'cannot serve[^"]*"[^"]*"\|RESUME for no session\|salvaging' "$d/s2.log" | head -1); client: $(tail -1 "$d/client.err")"
	fi
done
echo "$restored of $runs runs restored"
[[ $restored == "$runs" ]]
