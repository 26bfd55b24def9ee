#!/usr/bin/env bash
# Runs one `quire bench` command from the release binary and records it as a run under
# bench/runs/<YYYY-MM-DD>-<NAME>/ (see bench/runs/README.md): the printed table, the
# progress lines, the JSON report, the exact command and the machine it ran on.
#   scripts/bench-run.sh NAME -- [bench] <store|search|serve|http> [ARGS...]
#   e.g. scripts/bench-run.sh laptop -- bench store --only mixed
# NAME says which machine (one word: laptop, ci-2core, ...). Builds the release binary
# first (cargo build --release --locked -p quire; CARGO_TARGET_DIR is honoured). The
# JSON goes into the run directory unless ARGS give --json. Refuses an existing run
# directory: one directory per run. Exits with the benchmark's status.
set -euo pipefail

usage() {
  echo "usage: $0 NAME -- [bench] <store|search|serve|http> [ARGS...]" >&2
  exit 2
}
[ "$#" -ge 3 ] && [ "$2" = "--" ] || usage
name="$1"
shift 2
case "$name" in
  */* | .* | "" | *" "*) echo "$0: NAME must be one word without '/', got '$name'" >&2; exit 2 ;;
esac
[ "$1" = "bench" ] && shift
[ "$#" -ge 1 ] || usage
sub="$1"
case "$sub" in
  store | search | serve | http) ;;
  *) echo "$0: not a recorded benchmark: '$sub' (store, search, serve or http)" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
run="bench/runs/$(date +%F)-$name"
if [ -e "$run" ]; then
  echo "$0: $run exists: one directory per run, pick another NAME" >&2
  exit 1
fi

cargo build --release --locked -p quire
quire="${CARGO_TARGET_DIR:-$repo/target}/release/quire"

args=(bench "$@")
json_given=false
for a in "$@"; do
  case "$a" in --json | --json=*) json_given=true ;; esac
done
mkdir -p "$run"
$json_given || args+=(--json "$run/$sub.json")

{
  printf 'nproc: %s\n' "$(nproc)"
  printf 'cpu: %s\n' "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || echo unknown)"
  printf 'kernel: %s\n' "$(uname -srvm)"
  printf 'rustc: %s\n' "$(rustc --version)"
  printf 'git: %s%s\n' "$(git rev-parse HEAD)" "$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
  printf 'date: %s\n' "$(date -u +%FT%TZ)"
  printf 'load average before: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$run/machine.txt"
printf '%q ' "$quire" "${args[@]}" | sed 's/ $/\n/' >"$run/command.txt"

status=0
"$quire" "${args[@]}" >"$run/$sub.txt" 2>"$run/$sub.log" || status=$?
printf 'load average after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$run/machine.txt"
cat "$run/$sub.txt"
echo "recorded in $run (exit status $status)" >&2
exit "$status"
