#!/usr/bin/env bash
# Installs quire's .deb on this machine and takes it away again, checking what an
# operator relies on: scripts/package-check.sh BINARY
#
#  1. build the package from BINARY (scripts/package-deb.sh) and `apt-get install` it;
#  2. the `quire` user, /var/lib/quire and /var/cache/quire exist, the configuration is
#     root:quire 0640 and `quire config check` accepts it, no unit was enabled;
#  3. the installed /usr/bin/quire, as the `quire` user with the packaged
#     configuration, serves a copy of examples/vault: a page, then the same page as a
#     hit; the time from `apt-get install` to that first page is printed;
#  4. `apt-get remove` keeps the configuration and the cache; `apt-get purge` deletes
#     them and the user.
# Fails on the first step that does not hold. Needs root (or sudo) and dpkg; skips
# with a message without them. Leaves the machine as it found it.
set -euo pipefail
cd "$(dirname "$0")/.."

binary="${1:?usage: $0 BINARY}"
if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "package check: not a Debian system (no dpkg/apt-get): skipped"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then SUDO="sudo"; else
    echo "package check: needs root or passwordless sudo: skipped"; exit 0
  fi
fi
if dpkg -s quire >/dev/null 2>&1; then
  echo "package check: a quire package is already installed here; not touching it: skipped"
  exit 0
fi

fail() { echo "package check FAILED: $*" >&2; exit 1; }
work="$(mktemp -d)"
port=18099
cleanup() {
  $SUDO pkill -u quire -f "/usr/bin/quire serve" 2>/dev/null || true
  dpkg -s quire >/dev/null 2>&1 && $SUDO apt-get purge -y -qq quire >/dev/null 2>&1 || true
  $SUDO rm -rf /var/lib/quire "$work"
}
trap cleanup EXIT

deb="$(scripts/package-deb.sh --binary "$binary" --out "$work")"
echo "package: $deb ($(du -h "$deb" | cut -f1); binary $(dpkg-deb --fsys-tarfile "$deb" | tar -tv ./usr/bin/quire | awk '{print $3}') bytes)"

start=$(date +%s.%N)
$SUDO apt-get install -y -qq "$deb" >/dev/null || fail "apt-get install"
getent passwd quire >/dev/null || fail "no quire user"
[ "$(stat -c '%U:%G %a' /var/lib/quire)" = "quire:quire 750" ] || fail "/var/lib/quire owner or mode"
[ "$(stat -c '%U:%G %a' /var/cache/quire)" = "quire:quire 750" ] || fail "/var/cache/quire owner or mode"
[ "$(stat -c '%U:%G %a' /etc/quire/quire.toml)" = "root:quire 640" ] || fail "/etc/quire/quire.toml owner or mode"
$SUDO /usr/bin/quire config check --config /etc/quire/quire.toml >/dev/null || fail "quire config check"
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  for u in quire.service quire-serve.service quire.socket; do
    [ "$(systemctl is-enabled "$u" 2>/dev/null || true)" != enabled ] || fail "$u enabled by installing"
  done
fi

# The packaged serve unit's command line, on a free port (port 80 needs the unit's
# capability), in the unit's working directory.
$SUDO cp -r examples/vault/. /var/lib/quire/vault/
$SUDO rm -f /var/lib/quire/vault/.quire/*.db* /var/lib/quire/vault/.quire/secret
$SUDO chown -R quire:quire /var/lib/quire/vault
(cd /var/lib/quire && $SUDO runuser -u quire -- /usr/bin/quire serve --config /etc/quire/quire.toml \
    --cache /var/cache/quire/serve.vol --listen "127.0.0.1:$port" /var/lib/quire/vault \
    >"$work/serve.log" 2>&1 &)
code=000
for _ in $(seq 1 300); do
  code="$(curl -s -o "$work/page" -w '%{http_code}' "http://127.0.0.1:$port/" || true)"
  [ "$code" = 200 ] && break
  sleep 0.1
done
served=$(date +%s.%N)
[ "$code" = 200 ] || { cat "$work/serve.log"; fail "no page from the installed binary (last status $code)"; }
grep -qi '<html' "$work/page" || fail "the page is not HTML"
curl -sI "http://127.0.0.1:$port/" | grep -qi '^cache-status: quire; hit' || fail "the second request was not a hit"
if grep -q 'WARN' "$work/serve.log"; then cat "$work/serve.log"; fail "a warning on a default start"; fi
awk -v a="$start" -v b="$served" 'BEGIN { printf "install to first page: %.1f s\n", b - a }'
$SUDO pkill -u quire -f "/usr/bin/quire serve" || true
sleep 0.5

$SUDO apt-get remove -y -qq quire >/dev/null || fail "apt-get remove"
[ -f /etc/quire/quire.toml ] || fail "remove deleted the configuration"
[ -f /var/cache/quire/serve.vol ] || fail "remove deleted the cache"
[ ! -e /usr/bin/quire ] || fail "remove left the binary"
$SUDO apt-get purge -y -qq quire >/dev/null 2>&1 || fail "apt-get purge"
[ ! -e /etc/quire ] || fail "purge left /etc/quire"
[ ! -e /var/cache/quire ] || fail "purge left /var/cache/quire"
! getent passwd quire >/dev/null || fail "purge left the quire user"
[ -d /var/lib/quire/vault ] || fail "purge deleted a vault with notes"
echo "package check: ok (install, serve, remove, purge)"
