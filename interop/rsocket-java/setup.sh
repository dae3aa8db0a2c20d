#!/usr/bin/env bash
# Builds the rsocket-java 1.1.5 peer (pom.xml, src/) for the interop test
# rsocket/interop_java_test.go: Maven resolves the pinned jars into ~/.m2
# (first run downloads from Maven Central, later runs are offline) and
# writes the classpath; javac compiles Peer.java. The result goes to
# ~/.cache/sluice/rsocket-java (classes/ and classpath.txt). Idempotent:
# does nothing when the sources' hash matches the last build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${SLUICE_RSOCKET_JAVA_DIR:-$HOME/.cache/sluice/rsocket-java}"
hash="$(cat "$here/pom.xml" $(find "$here/src" -name '*.java' | LC_ALL=C sort) | sha256sum | cut -d' ' -f1)"
if [ -f "$out/classpath.txt" ] && [ "$(cat "$out/hash" 2>/dev/null)" = "$hash" ]; then
  echo "rsocket-java peer already built in $out"
  exit 0
fi
mkdir -p "$out"
rm -rf "$out/classes" "$out/hash"
cp_file="$out/deps.txt"
mvn_args=(-B -q -f "$here/pom.xml" dependency:build-classpath -Dmdep.outputFile="$cp_file")
# Offline first (everything in ~/.m2 already), online when something is missing.
timeout 120 mvn -o "${mvn_args[@]}" >/dev/null 2>&1 || timeout 480 mvn "${mvn_args[@]}"
timeout 120 javac -nowarn -d "$out/classes" -cp "$(cat "$cp_file")" $(find "$here/src" -name '*.java')
printf '%s:%s\n' "$out/classes" "$(cat "$cp_file")" >"$out/classpath.txt"
echo "$hash" >"$out/hash"
echo "rsocket-java peer built in $out (java -cp \$(cat $out/classpath.txt) sluice.interop.Peer)"
