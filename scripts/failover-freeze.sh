#!/bin/bash
# Frozen-sink failover with default agent settings, on loopback: sinks A and B
# (independent embedded stores), one agent with --sink A,B; A is SIGSTOPped
# and the script prints how long until B holds the records produced after.
# Usage: SLUICE=path/to/sluice scripts/failover-freeze.sh (default: sluice on PATH).
set -u
S=${SLUICE:-sluice}; D=$(mktemp -d); cd "$D"
trap "rm -rf $D" EXIT
$S sink --listen 127.0.0.1:27501 --data $D/A > a.log 2>&1 & PA=$!
$S sink --listen 127.0.0.1:27502 --data $D/B > b.log 2>&1 & PB=$!
sleep 2
$S agent --sink 127.0.0.1:27501,127.0.0.1:27502 --spool $D/S --ingest 127.0.0.1:27503 > ag.log 2>&1 & PG=$!
sleep 1
seq 1 1000 | $S produce --agent 127.0.0.1:27503 2>/dev/null; sleep 1
echo "before freeze: A=$(timeout 5 $S consume --sink 127.0.0.1:27501 | wc -l) B=$(timeout 5 $S consume --sink 127.0.0.1:27502 | wc -l)"
kill -STOP $PA; T0=$(date +%s.%N)
seq 1001 2000 | $S produce --agent 127.0.0.1:27503 2>/dev/null
n=0
for i in $(seq 1 400); do n=$(timeout 5 $S consume --sink 127.0.0.1:27502 2>/dev/null | wc -l); [ "$n" -ge 1000 ] && break; sleep 0.25; done
T1=$(date +%s.%N); echo "B holds $n records $(echo "$T1 - $T0" | bc) s after A froze"
kill -CONT $PA; sleep 2
grep -E "level=(WARN|ERROR)" ag.log | cut -c1-220 | head -4
kill $PA $PB $PG; wait
