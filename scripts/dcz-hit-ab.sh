#!/usr/bin/env bash
# CPU per hit of a `dcz` answer against a brotli answer of the same page, from the same
# server, in interleaved rounds: `quire serve` on a copy of examples/vault (one worker,
# CPU 0), wrk on CPU 1 asking for /about with either `Accept-Encoding: gzip, br` or
# `Accept-Encoding: gzip, br, zstd, dcz` and the dictionary's `Available-Dictionary`;
# the server's CPU from /proc/PID/stat around each round, divided by the requests.
#   scripts/dcz-hit-ab.sh QUIRE_BINARY        (ROUNDS=5 SECS=6 by default)
# Needs wrk, curl, taskset, xxd, base64.
set -euo pipefail
Q=$1; ROUNDS=${ROUNDS:-5}; SECS=${SECS:-6}; PORT=${PORT:-18181}
. "$(dirname "$0")/serve-ab-lib.sh"
DP=$(curl -sI "$B/" | grep -i '^link:' | sed 's/.*<\(.*\)>.*/\1/')
H=$(curl -s "$B$DP" | sha256sum | cut -d' ' -f1 | xxd -r -p | base64)
curl -s -o /dev/null "$B/about"
# The dcz body is made in the background after the first request.
for _ in $(seq 150); do
  got=$(curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip, br, zstd, dcz' -H "Available-Dictionary: :$H:" "$B/about" | tr -d '\r' | grep -i '^content-encoding' || true)
  [ "${got,,}" = "content-encoding: dcz" ] && break
  sleep 0.2
done
[ "${got,,}" = "content-encoding: dcz" ] || { echo "no dcz answer: '$got'" >&2; exit 1; }
for r in $(seq "$ROUNDS"); do
  for mode in br dcz; do
    if [ $mode = br ]; then A=(-H 'Accept-Encoding: gzip, br'); else A=(-H 'Accept-Encoding: gzip, br, zstd, dcz' -H "Available-Dictionary: :$H:"); fi
    c0=$(cpu); out=$(taskset -c 1 wrk -t1 -c32 -d"${SECS}s" "${A[@]}" "$B/about"); c1=$(cpu)
    n=$(echo "$out" | awk '/requests in/{print $1}')
    echo "$r $mode requests=$n cpu_us_per_request=$(python3 -c "print(round(($c1-$c0)*1e6/$(getconf CLK_TCK)/$n,2))")"
  done
done
