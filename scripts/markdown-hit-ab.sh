#!/usr/bin/env bash
# CPU per hit of a note asked for as markdown (`Accept: text/markdown`, negotiated at
# the page's own URL) against the same note's HTML page, from the same server, in
# interleaved rounds: `quire serve` on a copy of examples/vault (one worker, CPU 0),
# wrk on CPU 1 asking for /about with `Accept-Encoding: gzip, br` and either a
# browser's `Accept` or `text/markdown`; the server's CPU from /proc/PID/stat around
# each round, divided by the requests; bytes per answer from curl.
#   scripts/markdown-hit-ab.sh QUIRE_BINARY        (ROUNDS=5 SECS=6 by default)
# Needs wrk, curl, taskset.
set -euo pipefail
Q=$1; ROUNDS=${ROUNDS:-5}; SECS=${SECS:-6}; PORT=${PORT:-18182}
. "$(dirname "$0")/serve-ab-lib.sh"
HTML='text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
# Both stored, and their brotli made in the background, before any round.
for accept in "$HTML" text/markdown; do
  for _ in $(seq 150); do
    got=$(curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip, br' -H "Accept: $accept" "$B/about" | tr -d '\r' | grep -i '^content-encoding' || true)
    [ "${got,,}" = "content-encoding: br" ] && break
    sleep 0.2
  done
  size=$(curl -s -H 'Accept-Encoding: gzip, br' -H "Accept: $accept" "$B/about" | wc -c)
  echo "accept '$accept': $size bytes (brotli)"
done
for r in $(seq "$ROUNDS"); do
  for mode in html md; do
    if [ $mode = html ]; then A="$HTML"; else A=text/markdown; fi
    c0=$(cpu); out=$(taskset -c 1 wrk -t1 -c32 -d"${SECS}s" -H 'Accept-Encoding: gzip, br' -H "Accept: $A" "$B/about"); c1=$(cpu)
    n=$(echo "$out" | awk '/requests in/{print $1}')
    echo "$r $mode requests=$n cpu_us_per_request=$(python3 -c "print(round(($c1-$c0)*1e6/$(getconf CLK_TCK)/$n,2))")"
  done
done
