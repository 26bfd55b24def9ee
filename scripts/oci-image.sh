#!/usr/bin/env bash
# Builds quire's container image without a container runtime, as packaging/Containerfile
# describes it: Debian bookworm (minbase, documentation left out, as -slim does), the
# Debian package (scripts/package-deb.sh) with ca-certificates, run as the
# package's non-root `quire` user, volumes /var/lib/quire and /var/cache/quire, port
# 8080, a health check on /_quire/health. Writes an OCI image archive that
# `docker load` and `podman load` read, and prints its path and sizes.
#
#   scripts/oci-image.sh [--binary PATH] [--out DIR] [--check]
#
# --check also runs the image's file system (a chroot, as the `quire` user) serving
# examples/vault, and gets a page and the health check from it. Needs mmdebstrap
# (Debian) and a Debian mirror; run as root (mmdebstrap and chroot).
set -euo pipefail
cd "$(dirname "$0")/.."

binary=""
out="${CARGO_TARGET_DIR:-target}/oci"
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --check) check=1; shift ;;
    *) echo "usage: $0 [--binary PATH] [--out DIR] [--check]" >&2; exit 2 ;;
  esac
done
command -v mmdebstrap >/dev/null || { echo "needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }

mkdir -p "$out"
work="$(mktemp -d)"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

deb="$(scripts/package-deb.sh ${binary:+--binary "$binary"} --out "$work/deb" | tail -1)"
# The slim image's path excludes: no documentation, man pages or locales. The package
# goes in by a hook (mmdebstrap's --include of a local .deb cannot reach it from the
# chroot); its dependencies are in by then.
mmdebstrap --variant=minbase --quiet \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --include="ca-certificates,adduser" \
  --customize-hook="cp '$deb' \"\$1/tmp/quire.deb\"" \
  --customize-hook='chroot "$1" dpkg -i /tmp/quire.deb' \
  --customize-hook='rm -rf "$1"/tmp/quire.deb "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*' \
  bookworm "$work/rootfs.tar"

python3 scripts/oci-pack.py "$work/rootfs.tar" "$out/quire-image.tar" \
  --version "$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
echo "image: $out/quire-image.tar ($(du -h "$out/quire-image.tar" | cut -f1); root file system $(du -h "$work/rootfs.tar" | cut -f1) unpacked)"

if [ "$check" = 1 ]; then
  root="$work/root"
  mkdir -p "$root"
  tar -xf "$work/rootfs.tar" -C "$root"
  cp -r examples/vault "$root/var/lib/quire/vault"
  chroot "$root" chown -R quire:quire /var/lib/quire/vault
  port=18093
  chroot --userspec=quire:quire "$root" /usr/bin/quire serve --listen "127.0.0.1:$port" \
    --cache /var/cache/quire/serve.vol /var/lib/quire/vault >"$work/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/_quire/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  # The image's own health check, run inside it.
  chroot --userspec=quire:quire "$root" /usr/bin/quire health --server "http://127.0.0.1:$port"
  curl -fsS "http://127.0.0.1:$port/" | grep -q "<html" || { cat "$work/serve.log"; exit 1; }
  # By number: the host's user names are not the image's.
  uid="$(ps -o uid= -p "$pid" | tr -d ' ')"
  want="$(chroot "$root" id -u quire)"
  [ "$uid" = "$want" ] && [ "$uid" != 0 ] || { echo "ran as uid $uid, not quire ($want)" >&2; exit 1; }
  echo "check: the image's file system serves examples/vault as the quire user"
fi
