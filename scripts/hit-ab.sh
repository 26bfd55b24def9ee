#!/usr/bin/env bash
# Hit-path A/B of two quire binaries on the peer corpus: does a change cost the hit
# path? Both proxies (one worker each) are pinned to CPU 0, in front of the corpus's
# origin; the load generator (`quire bench load`, 64 keep-alive connections,
# Accept-Encoding: gzip, every page in turn) is pinned to CPU 1 and alternates
# between them, ROUNDS rounds of SECS seconds each. Prints hits/s per round, the
# medians and the per-round ratios B/A (rounds are paired, so host drift between
# rounds cancels out of the ratio).
#
#   scripts/hit-ab.sh BINARY_A BINARY_B        # ROUNDS=8 SECS=8 by default
#
# Needs the corpus of ../shared/bench/peers (gen_corpus.py + gzip, or setup.sh) in
# $SITE (default /tmp/peerbench/site).
set -euo pipefail
A="$1"
B="$2"
ROUNDS="${ROUNDS:-8}"
SECS="${SECS:-8}"
SITE="${SITE:-/tmp/peerbench/site}"
PEERS="$(cd "$(dirname "$0")/../../shared/bench/peers" && pwd)"
WORK="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$PEERS/origin.py" "$SITE" --port 9000 >"$WORK/origin.log" 2>&1 &
pids+=($!)
taskset -c 0 "$A" proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:9101 \
  --cache "$WORK/a.vol" --cache-size 1GiB --workers 1 >"$WORK/a.log" 2>&1 &
pids+=($!)
taskset -c 0 "$B" proxy --origin http://127.0.0.1:9000 --listen 127.0.0.1:9102 \
  --cache "$WORK/b.vol" --cache-size 1GiB --workers 1 >"$WORK/b.log" 2>&1 &
pids+=($!)
sleep 1

# The origin takes 20 ms a page: warm with many connections until a check of every
# page finds only hits (each check's misses fill too).
for port in 9101 9102; do
  for attempt in 1 2 3 4 5 6; do
    "$B" bench load --host "127.0.0.1:$port" --paths "$SITE/urls.txt" --connections 64 \
      --duration "${WARM_SECS:-20}" --accept-encoding gzip >/dev/null
    misses=0
    while read -r p; do
      cs="$(curl -s -o /dev/null -D - -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port$p" | tr -d '\r' | grep -i '^cache-status:' || true)"
      case "$cs" in *"; hit"*) ;; *) misses=$((misses + 1)) ;; esac
    done <"$SITE/urls.txt"
    echo "port $port, warm-up $attempt: $misses of $(wc -l <"$SITE/urls.txt") pages not a hit"
    [ "$misses" -eq 0 ] && break
  done
  [ "$misses" -eq 0 ] || { echo "not warm" >&2; exit 1; }
done

# Background work a warm-up left (codings added after the commit) must not run in
# the timed rounds: wait until both proxies' CPU time stands still for 3 s.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for pid in "${pids[1]}" "${pids[2]}"; do
  still=0
  last="$(cpu "$pid")"
  for _ in $(seq 1 600); do
    sleep 1
    now="$(cpu "$pid")"
    if [ "$now" = "$last" ]; then still=$((still + 1)); else still=0; fi
    last="$now"
    [ "$still" -ge 3 ] && break
  done
  echo "pid $pid idle (cpu $last jiffies)"
done

rate() {
  taskset -c 1 "$B" bench load --host "127.0.0.1:$1" --paths "$SITE/urls.txt" \
    --connections 64 --duration "$SECS" --accept-encoding gzip |
    sed -n 's/^QUIRE-LOAD //p' | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d["errors"] or d["non_2xx"]:
    sys.exit("errors: %d, non-2xx: %d" % (d["errors"], d["non_2xx"]))
print(round(d["achieved_rate"]))'
}

ra=()
rb=()
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then a="$(rate 9101)"; b="$(rate 9102)"; else b="$(rate 9102)"; a="$(rate 9101)"; fi
  ra+=("$a")
  rb+=("$b")
  echo "round $i: A $a  B $b"
done
python3 - "${ra[*]}" "${rb[*]}" <<'EOF'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
r = [y / x for x, y in zip(a, b)]
print(f"median hits/s: A {statistics.median(a):,.0f}  B {statistics.median(b):,.0f}")
print("paired ratios B/A: " + " ".join(f"{x:.3f}" for x in r))
print(f"median ratio B/A {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})")
EOF
