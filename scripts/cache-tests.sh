#!/usr/bin/env bash
# Runs the public HTTP cache test suite (http-cache-tests, cache-tests.fyi; npm) against
# quire proxy, and scores it next to the peer results the package ships.
#   scripts/cache-tests.sh [FILL_HEADERS [MIN_PASSED]]   # "all" (default here) or "keyed";
#   with MIN_PASSED, exits non-zero when quire passes fewer tests (CI uses this)
# The suite identifies each request by its own `Req-Num` request header, which quire's
# default `fill_headers = "keyed"` does not forward to the origin on fills (only keyed
# fields do); "all" forwards every field, as nginx and Varnish do, so the suite can
# track its requests. Needs node/npm and `cargo build -p quire`.
set -euo pipefail
MODE="${1:-all}"
MIN="${2:-0}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-/tmp/quire-cache-tests}"
QUIRE="${QUIRE:-${CARGO_TARGET_DIR:-$REPO/target}/debug/quire}"
ORIGIN_PORT=8000 QUIRE_PORT=8092
mkdir -p "$WORK"
cd "$WORK"
[ -d node_modules/http-cache-tests ] || npm i --silent --install-strategy=nested http-cache-tests@0.4.5
SUITE="$WORK/node_modules/http-cache-tests"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
(cd "$SUITE" && npm_config_protocol=http npm_config_port=$ORIGIN_PORT npm_config_pidfile="$WORK/server.pid" \
  exec node server/server.mjs) > "$WORK/server.log" 2>&1 &
pids+=($!)
rm -rf "$WORK/cache" && mkdir -p "$WORK/cache"
# The suite runs 100 tests at a time from one address: more fills in flight than the
# default per-client quota (64) allows, and a request over the quota is passed through
# unstored (`detail=fills-busy`), which fails whichever tests it lands on. The quota is
# raised to the slot count here: one test client is a whole crowd of clients.
printf 'fill_headers = "%s"\n[limits]\nfills_per_client = 256\n' "$MODE" > "$WORK/quire.toml"
QUIRE_ADMIN_TOKEN=cache-tests-admin-token "$QUIRE" proxy --origin "http://127.0.0.1:$ORIGIN_PORT" \
  --listen "127.0.0.1:$QUIRE_PORT" --cache "$WORK/cache/c.vol" --cache-size 64MiB \
  --config "$WORK/quire.toml" > "$WORK/quire.log" 2>&1 &
pids+=($!)
sleep 2
(cd "$SUITE" && npm_config_base="http://127.0.0.1:$QUIRE_PORT" npm_package_config_id= \
  node --no-warnings cli.mjs) > "$WORK/quire-$MODE.json"
python3 - "$WORK/quire-$MODE.json" "$SUITE/results" "$MODE" "$MIN" <<'PY'
import json, os, sys, collections
mine, results, mode, least = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sets = {"quire (fill_headers=%s)" % mode: json.load(open(mine))}
for f in sorted(os.listdir(results)):
    if f.endswith(".json"):
        sets[f[:-5] + " (bundled result)"] = json.load(open(os.path.join(results, f)))
ids = set(next(iter(sets.values())))
print("| cache | passed | of | failed assertions | setup failures |\n|---|---|---|---|---|")
for name, r in sets.items():
    common = [k for k in ids if k in r]
    kinds = collections.Counter("pass" if r[k] is True else (r[k][0] if isinstance(r[k], list) else "other") for k in common)
    print("| %s | %d | %d | %d | %d |" % (name, kinds["pass"], len(common), kinds["Assertion"], kinds["Setup"]))
passed = sum(1 for v in json.load(open(mine)).values() if v is True)
if passed < least:
    sys.exit("quire passed %d tests, fewer than the %d required" % (passed, least))
PY
