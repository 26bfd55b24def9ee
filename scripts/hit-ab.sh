#!/usr/bin/env bash
# Hit-path A/B of two quire binaries on the peer corpus: does a change cost the hit
# path? Both proxies (one worker each) are pinned to CPU 0, in front of the corpus's
# origin; the load generator (`quire bench load`, 64 keep-alive connections,
# Accept-Encoding: gzip, every page in turn) is pinned to CPU 1 and alternates
# between them, ROUNDS rounds of SECS seconds each. Prints hits/s and the proxy's
# CPU per hit (its utime + stime from /proc over the round) per round, the medians
# and the per-round ratios B/A (rounds are paired, so host drift between rounds
# cancels out of the ratio). On a shared host CPU per hit is the steadier figure:
# hits/s moves with what else runs on CPU 0, the CPU a hit costs much less.
#
#   scripts/hit-ab.sh BINARY_A BINARY_B        # ROUNDS=8 SECS=8 by default
#   PORT=9400 scripts/hit-ab.sh A B            # origin on 9400, proxies on 9401, 9402
#   CONFIG=quire.toml scripts/hit-ab.sh A B    # both proxies with this --config (e.g.
#                                              # [encodings] br = false, zstd = false:
#                                              # no background compression to wait out)
#   CONFIG_A=a.toml CONFIG_B=b.toml scripts/hit-ab.sh Q Q   # one binary, two configs
#   RATE=40000 scripts/hit-ab.sh A B           # open loop at this offered load (CPU
#                                              # per hit where the floor is compared;
#                                              # closed loop, the default, saturates)
#
# Needs the corpus of ../shared/bench/peers (gen_corpus.py + gzip, or setup.sh) in
# $SITE (default /tmp/peerbench/site).
set -euo pipefail
A="$1"
B="$2"
ROUNDS="${ROUNDS:-8}"
CONFIG_A="${CONFIG_A:-${CONFIG:-}}"
CONFIG_B="${CONFIG_B:-${CONFIG:-}}"
SECS="${SECS:-8}"
SITE="${SITE:-/tmp/peerbench/site}"
PORT="${PORT:-9100}"
ORIGIN=$((PORT == 9100 ? 9000 : PORT))
PA=$((PORT + 1))
PB=$((PORT + 2))
PEERS="$(cd "$(dirname "$0")/../../shared/bench/peers" && pwd)"
WORK="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$PEERS/origin.py" "$SITE" --port "$ORIGIN" >"$WORK/origin.log" 2>&1 &
pids+=($!)
taskset -c 0 "$A" proxy --origin "http://127.0.0.1:$ORIGIN" --listen "127.0.0.1:$PA" \
  --cache "$WORK/a.vol" --cache-size 1GiB --workers 1 ${CONFIG_A:+--config "$CONFIG_A"} >"$WORK/a.log" 2>&1 &
pids+=($!)
taskset -c 0 "$B" proxy --origin "http://127.0.0.1:$ORIGIN" --listen "127.0.0.1:$PB" \
  --cache "$WORK/b.vol" --cache-size 1GiB --workers 1 ${CONFIG_B:+--config "$CONFIG_B"} >"$WORK/b.log" 2>&1 &
pids+=($!)
sleep 1

# The origin takes 20 ms a page: warm with many connections until a check of every
# page finds only hits (each check's misses fill too).
for port in "$PA" "$PB"; do
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

# One round on port $1 against the proxy with pid $2: "hits/s us-of-CPU-per-hit".
rate() {
  local c0 c1 hz
  hz="$(getconf CLK_TCK)"
  c0="$(cpu "$2")"
  taskset -c 1 "$B" bench load --host "127.0.0.1:$1" --paths "$SITE/urls.txt" \
    --connections 64 --duration "$SECS" --accept-encoding gzip ${RATE:+--rate "$RATE"} >"$WORK/round.out"
  c1="$(cpu "$2")"
  sed -n 's/^QUIRE-LOAD //p' "$WORK/round.out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d["errors"] or d["non_2xx"]:
    sys.exit("errors: %d, non-2xx: %d" % (d["errors"], d["non_2xx"]))
jiffies, hz = int(sys.argv[1]), int(sys.argv[2])
print(round(d["achieved_rate"]), round(jiffies / hz * 1e6 / d["requests"], 2))' "$((c1 - c0))" "$hz"
}

ra=()
rb=()
ua=()
ub=()
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then
    read -r a uA < <(rate "$PA" "${pids[1]}")
    read -r b uB < <(rate "$PB" "${pids[2]}")
  else
    read -r b uB < <(rate "$PB" "${pids[2]}")
    read -r a uA < <(rate "$PA" "${pids[1]}")
  fi
  [ -n "${uA:-}" ] && [ -n "${uB:-}" ] || { echo "round $i failed (see above)" >&2; exit 1; }
  ra+=("$a")
  rb+=("$b")
  ua+=("$uA")
  ub+=("$uB")
  echo "round $i: A $a hits/s, $uA us/hit  B $b hits/s, $uB us/hit"
done
python3 - "${ra[*]}" "${rb[*]}" "${ua[*]}" "${ub[*]}" <<'EOF'
import statistics, sys
a, b, ua, ub = ([float(x) for x in arg.split()] for arg in sys.argv[1:5])
r = [y / x for x, y in zip(a, b)]
u = [y / x for x, y in zip(ua, ub)]
print(f"median hits/s: A {statistics.median(a):,.0f}  B {statistics.median(b):,.0f}")
print("paired ratios B/A: " + " ".join(f"{x:.3f}" for x in r))
print(f"median ratio B/A {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})")
print(f"median CPU per hit: A {statistics.median(ua):.2f} us  B {statistics.median(ub):.2f} us")
print("paired CPU-per-hit ratios B/A: " + " ".join(f"{x:.3f}" for x in u))
print(f"median CPU-per-hit ratio B/A {statistics.median(u):.3f} (min {min(u):.3f}, max {max(u):.3f})")
EOF
