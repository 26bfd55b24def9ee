# Sourced by scripts/dcz-hit-ab.sh and scripts/markdown-hit-ab.sh: starts `quire serve`
# ($Q) on a copy of examples/vault on CPU 0 with one worker at 127.0.0.1:$PORT, waits
# until it answers, and defines `cpu` (its utime + stime in clock ticks). Sets P (its
# pid), B (its base URL) and T (a scratch folder removed, with the server, on exit).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d); trap 'kill "$P" 2>/dev/null || true; rm -rf "$T"' EXIT
cp -r "$ROOT/examples/vault" "$T/vault"; rm -f "$T"/vault/.quire/*.db*
taskset -c 0 "$Q" serve "$T/vault" --listen 127.0.0.1:$PORT --cache "$T/s.vol" --workers 1 >/dev/null 2>&1 &
P=$!
B=http://127.0.0.1:$PORT
for _ in $(seq 100); do curl -sf -o /dev/null "$B/" && break; sleep 0.2; done
cpu() { awk '{print $14+$15}' "/proc/$P/stat"; }
